"""`Relay`: from a broker thread's callback to Channels groups on the ASGI event loop.

The metrics hub and the panel jobs call their subscribers from their own threads and must not be
blocked, while a Channels layer is used from the event loop. A relay subscribes to such a source,
and its callback only schedules the delivery on the loop (``call_soon_threadsafe``); the delivery
coroutine then ``group_send``s to the groups concerned.

Relays are shared by the sockets of one event loop and counted: the first socket to need a source
subscribes to it, the last one to leave unsubscribes (`acquire` / `release`). A relay whose loop
is gone (a test's loop, closed) is replaced on the next `acquire`.

Thread-safety: `acquire` and `release` run on the event loop only; the callback from the source
thread touches nothing but ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

Subscribe = Callable[[Callable[[Any], None]], Callable[[], None]]
Deliver = Callable[[Any], Awaitable[None]]


class Relay:
    def __init__(
        self,
        source: object,
        subscribe: Subscribe,
        deliver: Deliver,
        loop: asyncio.AbstractEventLoop,
    ):
        self.source = source
        self.loop = loop
        self.users = 0
        self.deliver = deliver  # the fan-out (its sockets may attach to its state)
        self._tasks: set[asyncio.Task] = set()
        self._unsubscribe: Callable[[], None] | None = subscribe(self._on_item)

    def _on_item(self, item: Any) -> None:
        """Called from the source's thread: hand over and return at once."""
        try:
            self.loop.call_soon_threadsafe(self._start_delivery, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.stop()

    def _start_delivery(self, item: Any) -> None:
        task = self.loop.create_task(self._deliver_logged(item))
        self._tasks.add(task)  # keep a reference until done (asyncio holds tasks weakly)
        task.add_done_callback(self._tasks.discard)

    async def _deliver_logged(self, item: Any) -> None:
        try:
            await self.deliver(item)
        except Exception:  # one lost batch must not end the relay
            log.exception("live metrics: delivering to the channel layer failed")

    def stop(self) -> None:
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    @property
    def usable(self) -> bool:
        return self._unsubscribe is not None and not self.loop.is_closed()


_relays: dict[str, Relay] = {}


def acquire(key: str, source: object, subscribe: Subscribe, deliver: Deliver) -> Relay:
    """The running loop's relay for `key` (subscribed to `source`), one more user counted."""
    loop = asyncio.get_running_loop()
    relay = _relays.get(key)
    if relay is None or not relay.usable or relay.loop is not loop or relay.source is not source:
        if relay is not None:
            relay.stop()
        relay = _relays[key] = Relay(source, subscribe, deliver, loop)
    relay.users += 1
    return relay


def release(key: str, relay: Relay) -> None:
    """One user fewer; the last one unsubscribes the relay from its source."""
    relay.users -= 1
    if relay.users <= 0:
        relay.stop()
        if _relays.get(key) is relay:
            del _relays[key]
