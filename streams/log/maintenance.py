"""The store's background work: interval flushes, checkpoints, retention and compaction.

One thread runs it; every step is also callable on demand (``LogStore.apply_retention``,
``LogStore.compact``, ``LogStore.write_checkpoints``). A failing step is logged and retried at its
next turn; it never stops the loop.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from streams.errors import StorageError

if TYPE_CHECKING:
    from streams.log.store import LogStore

log = logging.getLogger(__name__)

TICK_S = 0.1


class Maintenance:
    def __init__(self, store: LogStore, checkpoint_interval_ms: int, retention_interval_ms: int):
        self.store = store
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.retention_interval_ms = retention_interval_ms
        now = store.clock()
        self._next_checkpoint = now + checkpoint_interval_ms
        self._next_retention = now + retention_interval_ms

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(TICK_S):
            self.tick(self.store.clock())

    def tick(self, now: int) -> None:
        self._step("interval flush", self._flush_due, now)
        if now >= self._next_checkpoint:
            self._next_checkpoint = now + self.checkpoint_interval_ms
            self._step("checkpoint", lambda _: self.store.write_checkpoints(), now)
        if now >= self._next_retention:
            self._next_retention = now + self.retention_interval_ms
            self._step("retention", self.store.apply_retention, now)
            self._step("compaction", self.store.compact, now)

    def _flush_due(self, now: int) -> None:
        for plog in self.store.all_partitions():
            plog.maybe_flush(now)

    def _step(self, name: str, fn, now: int) -> None:
        try:
            fn(now)
        except StorageError as exc:  # a full disk: already logged once by its RefusalLog
            log.debug("log maintenance step %r: %s", name, exc)
        except Exception:  # noqa: BLE001 - keep maintenance alive; the next turn retries
            log.exception("log maintenance step %r failed", name)
