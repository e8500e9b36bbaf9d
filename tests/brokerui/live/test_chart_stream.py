"""`feeds.ChartStream`: the live windows of one scope at one resolution, shared by its sockets,
seeded by the first one's backfill with what arrived meanwhile replayed (issue 27)."""

from __future__ import annotations

import json

from brokerui.console.live.feeds import POINTS_EVENT, ChartStream
from brokerui.console.live.scopes import Scope
from streams.broker.metrics import Point, series
from streams.broker.metrics.downsample import ChartFeed, plan_for

RATE = series("records_in", "orders")
T0 = 1_700_000_000_000 - 1_700_000_000_000 % 10_000  # the start of a 10-second window


def windows(event: dict) -> dict[int, tuple[float, int]]:
    body = json.loads(event["body"])
    assert body["type"] == "points" and body["resolution"] == 10_000
    return {t: (v, partial) for _s, t, _w, v, _rev, partial in body["points"]}


def test_batches_before_the_seed_are_replayed_into_it_and_a_closed_window_stays_final():
    stream = ChartStream(Scope("overview"), plan_for(900_000))
    assert stream.users == 0 and not stream.seeded
    # while the first backfill reads history: the second T0+1000 closes, then a late partial
    assert stream.live([Point(RATE, T0 + 1000, 1000, 4.0)]) is None
    assert stream.live([Point(RATE, T0 + 1000, 1000, 3.0, 0, True)]) is None

    chart = ChartFeed(900_000)  # the backfill: history had only the second T0, closed
    chart.backfill([Point(RATE, T0, 1000, 2.0)])
    event = stream.seed(chart)
    assert event["type"] == POINTS_EVENT and event["latest"] == T0
    # (2 + 4) / 2 s × 10 s, open (8 of its seconds to come); the late partial changed nothing
    assert windows(event) == {T0: (30.0, 1)}
    assert stream.seed(ChartFeed(900_000)) is None  # seeded once: later backfills are their own

    assert stream.live([Point(RATE, T0 + 1000, 1000, 3.0, 0, True)]) is None  # not again
    event = stream.live([Point(RATE, T0 + 2000, 1000, 9.0, 0, True)])
    assert windows(event) == {T0: (50.0, 1)}  # (2 + 4 + 9) / 3 s × 10 s, so far


def test_a_stream_keeps_a_bounded_amount_while_unseeded():
    stream = ChartStream(Scope("overview"), plan_for(300_000))
    for i in range(ChartStream.PENDING_MAX + 10):
        stream.live([Point(RATE, T0 + i * 1000, 1000, 1.0)])
    assert len(stream._pending) == ChartStream.PENDING_MAX


def test_a_socket_sends_the_windows_that_come_during_its_backfill_after_it_in_order():
    """The stream hands its windows to its sockets by a call, not through a channel (whose
    queue used to hold them behind the handler running): while a socket reads its history,
    what comes waits and follows the backfill, in order; then windows go straight out."""
    import asyncio
    from types import SimpleNamespace

    from brokerui.console.live.consumers import MetricsConsumer
    from brokerui.console.live.feeds import MetricsFanOut

    consumer = MetricsConsumer()
    fan_out = MetricsFanOut()
    stream = fan_out.attach(Scope("overview"), plan_for(300_000), consumer)
    consumer.stream, consumer._relay = stream, SimpleNamespace(deliver=fan_out)
    sent: list[str] = []

    async def send_live(message) -> None:
        sent.append(json.loads(message)["type"] if "backfill" in message else message)

    def event(n: int) -> dict:
        return {"type": POINTS_EVENT, "body": f"points {n}", "latest": T0 + n}

    async def read_history(since_ms):
        await stream.publish(event(1))  # the hub's batches, while history is read
        await stream.publish(event(2))
        return T0, [], ChartFeed(300_000)

    consumer.send_live, consumer.read_history = send_live, read_history

    async def body():
        await consumer.backfill(None)
        assert stream.seeded  # the first socket's backfill seeded the stream
        await stream.publish(event(3))

    asyncio.run(body())
    assert sent == ["backfill", "points 1", "points 2", "points 3"]
    assert consumer.last_t == T0 + 3
    fan_out.detach(stream, consumer)
    assert stream.users == 0 and not fan_out.streams
