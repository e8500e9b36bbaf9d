"""Disk refusals (a full disk, a quota, an I/O error) as one clear log line per streak.

A full disk refuses every write until space returns, and producers retry: logging each refusal
(with a traceback) would bury the one line an operator needs. A `RefusalLog` per place that
writes (a partition, the store's checkpoints) logs the first refusal of a streak as a warning
and the first success after it as an info line with the count; the refusals in between are
logged at debug level. Each refusal still becomes a `StorageError` for its caller.

Thread-safety: any thread may call `refused` and `succeeded`.
"""

from __future__ import annotations

import logging
import os
import threading

from streams.errors import StorageError

log = logging.getLogger("streams.log.storage")


class RefusalLog:
    def __init__(self, what: str):
        self.what = what  # e.g. "orders-0", "checkpoints of /data"
        self.count = 0
        self._lock = threading.Lock()

    def refused(self, action: str, exc: OSError, consequence: str) -> StorageError:
        """Note one refusal of `action` ("append 4,077 bytes to ...") and return the error to
        raise; `consequence` says what it means for the caller ("nothing was stored ...")."""
        where = f" ({os.path.basename(exc.filename)})" if exc.filename else ""
        message = f"{self.what}: the disk refused to {action}: {exc.strerror or exc}{where}"
        with self._lock:
            first = self.count == 0
            self.count += 1
        if first:
            log.warning("%s; %s", message, consequence)
        else:
            log.debug("%s (refusal %d of this streak)", message, self.count)
        return StorageError(f"{message}; {consequence}", exc.errno)

    def succeeded(self) -> None:
        if not self.count:  # the common case: no lock taken
            return
        with self._lock:
            count, self.count = self.count, 0
        if count:
            log.info("%s: writes succeed again after %d refused by the disk", self.what, count)
