"""Wake long-polling Fetch requests when data arrives, without polling.

The store calls `on_append(partition_log)` on the appending (or syncing) thread each time a
partition's high watermark advances. That call only checks whether any fetch waits on the
partition and, if so, schedules the wake-up on the listener's event loop — a dict lookup on the
append hot path, and no cross-thread call at all when nobody is waiting.

Thread-safety: `on_append` may be called from any thread; every other method runs on the loop.
A waiter registers *before* it reads the partitions, so an append that lands between the read
and the wait still finds the registration (the high watermark is advanced before the callback).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

PartitionKey = tuple[str, int]


class AppendNotifier:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._waiters: dict[PartitionKey, set[asyncio.Future]] = {}

    def on_append(self, plog) -> None:
        key = (plog.topic, plog.partition)
        if key in self._waiters:
            try:
                self._loop.call_soon_threadsafe(self._wake, key)
            except RuntimeError:  # the listener's loop closed meanwhile: nobody left to wake
                pass

    def _wake(self, key: PartitionKey) -> None:
        for fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    def watch(self, keys: Iterable[PartitionKey]) -> asyncio.Future:
        """A future completed at the next append to any of `keys`; pass it to `unwatch`."""
        fut = self._loop.create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        return fut

    def unwatch(self, keys: Iterable[PartitionKey], fut: asyncio.Future) -> None:
        for key in keys:
            waiting = self._waiters.get(key)
            if waiting is not None:
                waiting.discard(fut)
                if not waiting:
                    del self._waiters[key]
