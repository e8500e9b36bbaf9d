"""A live tail: the records written to a topic after a position, as they are written.

A tail is a forward browse (`streams.cluster.browse`, with its filters, expression and budgets)
from a position (a forward cursor, ``f:0=120,1=55``) to the partitions' ends at the time of
the read, run again each time new records arrive. Nothing is kept per tail between reads: the
caller holds the position and asks for what follows it (a long poll), so a reader that stops
asking costs nothing, and one that falls far behind is moved to the newest records with the
count of those it skipped (`TailStep.skipped`), never buffered for.

`wait_for_records` is what a long poll awaits: on the built-in broker, the store's append
listener wakes it (a few milliseconds after the write); on an external cluster, the ends are
asked every `POLL_S`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Protocol

from streams.cluster.browse import BrowseRequest, BrowseResult, decode_cursor, encode_cursor
from streams.errors import InvalidRecord

# records past a position after which a tail skips to the newest: a page shows 500 rows at
# most, and a tail that read on through a backlog shows records seconds old (at 10,000
# records/s, its newest row was 0.6 s old at the median with 10,000 here)
MAX_BEHIND = 1_000
POLL_S = 0.25  # how often an external cluster's ends are asked while a tail waits


class TailCluster(Protocol):
    """What a tail reads (``streams.cluster.Cluster``)."""

    def browse(self, request: BrowseRequest) -> BrowseResult: ...

    def partition_offsets(self, *, topic: str) -> list[tuple[int, int]]: ...


@dataclasses.dataclass(frozen=True)
class TailStep:
    result: BrowseResult  # the records after the position (at most a page), oldest first
    cursor: str  # where the next step starts
    skipped: int  # records passed over because the tail was more than MAX_BEHIND behind


def start_cursor(cluster: TailCluster, topic: str, partition: int | None = None) -> str:
    """The position of a tail that starts now: each partition's end."""
    ends = cluster.partition_offsets(topic=topic)
    return encode_cursor(
        "forward", {p: end for p, (_, end) in enumerate(ends) if _in(p, partition)}
    )


def positions_of(cursor: str) -> dict[int, int]:
    direction, positions = decode_cursor(cursor)
    if direction != "forward":
        raise InvalidRecord(f"a tail position is a forward cursor (f:...), not {cursor!r}")
    return positions


def tail_step(cluster: TailCluster, request: BrowseRequest, cursor: str) -> TailStep:
    """The records of `request` (its topic, partition, filters) after `cursor`, up to a page of
    them and to the ends now; a tail more than MAX_BEHIND records behind first moves to the
    newest page of records."""
    positions = positions_of(cursor)
    ends = {p: end for p, (_, end) in enumerate(cluster.partition_offsets(topic=request.topic))}
    ends = {p: e for p, e in ends.items() if _in(p, request.partition)}
    positions = {p: min(positions.get(p, e), e) for p, e in ends.items()}
    behind = sum(e - positions[p] for p, e in ends.items())
    skipped = 0
    if behind > MAX_BEHIND:  # the newest page: an equal share of it from each partition
        share = max(1, request.page_size // max(1, len(ends)))
        newest = {p: max(positions[p], e - share) for p, e in ends.items()}
        skipped = sum(newest[p] - positions[p] for p in ends)
        positions = newest
    result = cluster.browse(
        dataclasses.replace(
            request,
            seek="oldest",
            cursor=encode_cursor("forward", positions),
            until=tuple(sorted(ends.items())),
        )
    )
    # no next page: every partition was read to its end now (records a filter left out too)
    after = result.next_cursor or encode_cursor("forward", ends)
    return TailStep(result, after, skipped)


async def wait_for_records(
    cluster: TailCluster,
    topic: str,
    cursor: str,
    timeout_s: float,
    subscribe: Callable[[Callable[[], None]], Callable[[], None]] | None = None,
) -> bool:
    """Wait until a partition of `topic` has records past `cursor` (True) or `timeout_s`
    passes (False). `subscribe(wake)` registers a callback the store calls on every append
    (from its own thread) and returns the function that removes it; without one, the ends
    are asked every POLL_S."""
    positions = positions_of(cursor)

    def has_more() -> bool:
        ends = cluster.partition_offsets(topic=topic)
        return any(end > positions.get(p, end) for p, (_, end) in enumerate(ends))

    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:  # from the appending thread: hand over to the loop, return at once
        loop.call_soon_threadsafe(woken.set)

    unsubscribe = subscribe(wake) if subscribe else None
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            woken.clear()  # before looking: an append from now on wakes the wait below
            if await asyncio.to_thread(has_more):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(woken.wait(), left if unsubscribe else min(left, POLL_S))
            except TimeoutError:
                pass
    finally:
        if unsubscribe is not None:
            unsubscribe()


class AppendListened(Protocol):
    """A store that calls listeners on appends (``streams.log.LogStore``)."""

    def add_append_listener(self, listener: Callable) -> None: ...

    def remove_append_listener(self, listener: Callable) -> None: ...


def store_subscription(store: AppendListened, topic: str):
    """`wait_for_records`' `subscribe` for a store: wakes on appends to `topic` only."""

    def subscribe(wake: Callable[[], None]) -> Callable[[], None]:
        def listener(plog) -> None:
            if plog.topic == topic:
                wake()

        store.add_append_listener(listener)
        return lambda: store.remove_append_listener(listener)

    return subscribe


def _in(partition: int, only: int | None) -> bool:
    return only is None or partition == only
