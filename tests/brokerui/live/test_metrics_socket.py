"""The live-metrics WebSocket (/ws/metrics/) through the whole ASGI stack: session auth, the
relay from the hub's thread to the event loop, the channel layer (in memory, and a real
redis-server), backfill, live points, pause and resume with the gap filled."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from brokerui.console.live.consumers import REFUSED
from streams.broker.metrics import series

pytestmark = pytest.mark.django_db


def run(coro_fn):
    """Run an async test body on an event loop, with DB calls going back to this thread."""
    return async_to_sync(coro_fn)()


def produce(broker, topic: str, n: int, partitions: int = 2) -> None:
    if topic not in broker.store.list_topics():
        broker.store.create_topic(topic, partitions)
    for i in range(n):
        broker.store.append(topic, b'{"n": %d}' % i, partition=i % partitions)


async def next_second(hub, clock) -> None:
    """Advance the hand clock a second and tick the hub in another thread, as its sampler."""
    clock.now += 1000
    await asyncio.to_thread(hub.tick)


async def receive(ws, kind: str) -> dict:
    """The next message of type `kind` (skipping acks of other kinds)."""
    for _ in range(10):
        message = await ws.receive_json_from(timeout=5)
        if message["type"] == kind:
            return message
    raise AssertionError(f"no {kind!r} message")


def values(message: dict, name: str) -> dict[int, float]:
    return {t: v for s, t, _w, v, *_flags in message["points"] if s == name}


def finality(message: dict, name: str) -> dict[int, str]:
    """Each window of `name` in `message`: "open" (partial, its value so far) or "final"."""
    return {r[1]: "open" if r[5] else "final" for r in message["points"] if r[0] == name}


def test_the_open_second_arrives_as_it_fills_and_the_closed_one_replaces_it(
    broker, hub, clock, connect, login, viewer
):
    """Issue 27: between ticks the hub's partial looks reach the socket, marked not final;
    what did not move is not sent again; the closed window follows, final."""
    headers = login(viewer)

    async def body():
        produce(broker, "orders", 1)
        await next_second(hub, clock)
        await next_second(hub, clock)  # the baseline and one closed second
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "topic", "name": "orders",
                               "range_ms": 300_000})  # fmt: skip
        await receive(ws, "backfill")
        open_second = clock.now - clock.now % 1000
        clock.now += 200
        await asyncio.to_thread(produce, broker, "orders", 4)
        await asyncio.to_thread(hub.partial)
        partial = await receive(ws, "points")
        name = series("end_offset", "orders", 0)
        assert finality(partial, name) == {open_second: "open"}
        assert values(partial, name) == {open_second: 3}  # 1 + 2 of the 4, partition 0
        rate = series("records_in", "orders")
        assert values(partial, rate) == {open_second: pytest.approx(4 * 1000 / 200, rel=0.2)}
        clock.now += 200
        await asyncio.to_thread(hub.partial)  # nothing moved: nothing comes
        assert await ws.receive_nothing(timeout=0.3)
        clock.now += 600
        await asyncio.to_thread(hub.tick)
        closed = await receive(ws, "points")
        assert finality(closed, rate) == {open_second: "final"}
        assert values(closed, rate) == {open_second: 4}
        await ws.disconnect()

    run(body)


def test_anonymous_connection_is_refused(connect, login):
    headers = login()

    async def body():
        ws = connect("/ws/metrics/", headers)
        connected, code = await ws.connect()
        assert not connected
        assert code == REFUSED
        await ws.disconnect()

    run(body)


def test_overview_backfill_then_live_points(broker, hub, clock, connect, login, viewer):
    produce(broker, "orders", 5)

    headers = login(viewer)

    async def body():
        await next_second(hub, clock)  # history: 5 records in the first window
        first_window = clock.now - 1000 - clock.now % 1000
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": 300_000})
        backfill = await receive(ws, "backfill")
        assert backfill["resolution"] == 1000  # 5 minutes: 1-second windows
        assert values(backfill, series("records_in", "orders")) == {first_window: 5}
        assert backfill["series"][series("records_in", "orders")] == ["records_in", ["orders"]]
        # per-partition series belong to the topic page, not the overview
        assert not values(backfill, series("records_in", "orders", 0))

        await asyncio.to_thread(produce, broker, "orders", 7)
        await next_second(hub, clock)
        live = await receive(ws, "points")
        assert values(live, series("records_in", "orders")) == {first_window + 1000: 7}
        assert values(live, series("records_in")) == {first_window + 1000: 7}
        await ws.disconnect()

    run(body)


def test_pause_stops_pushes_and_resume_fills_the_gap(broker, hub, clock, connect, login, operator):
    produce(broker, "orders", 1)

    headers = login(operator)

    async def body():
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to(
            {"type": "subscribe", "scope": "topic", "name": "orders", "range_ms": 300_000}
        )
        await receive(ws, "backfill")
        await next_second(hub, clock)
        seen = await receive(ws, "points")
        last_t = max(t for _s, t, *_ in seen["points"])

        await ws.send_json_to({"type": "pause"})
        await receive(ws, "paused")
        await asyncio.to_thread(produce, broker, "orders", 4)
        await next_second(hub, clock)  # a window closes while the tab is hidden
        await next_second(hub, clock)
        assert await ws.receive_nothing(timeout=0.5)

        # from the window after the last it had (a page sends its last one: it may be open)
        await ws.send_json_to({"type": "resume", "since": last_t + 1000})
        await receive(ws, "resumed")
        gap = await receive(ws, "backfill")
        by_partition = values(gap, series("records_in", "orders", 0))
        by_partition.update(
            {
                t: v + by_partition.get(t, 0)
                for t, v in values(gap, series("records_in", "orders", 1)).items()
            }
        )
        assert sorted(by_partition) == [last_t + 1000, last_t + 2000]  # both missed windows
        assert sum(by_partition.values()) == 4
        await ws.disconnect()

    run(body)


def test_group_page_gets_lag_and_the_produce_rate_of_its_topics(
    broker, hub, clock, connect, login, viewer
):
    produce(broker, "orders", 6)
    produce(broker, "clicks", 3, partitions=1)
    broker.coordinator.commit_offsets("billing", {("orders", 0): 1, ("orders", 1): 1})

    headers = login(viewer)

    async def body():
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "group", "name": "billing"})
        await receive(ws, "backfill")
        await asyncio.to_thread(produce, broker, "orders", 2)
        await asyncio.to_thread(produce, broker, "clicks", 2, 1)
        await next_second(hub, clock)
        live = await receive(ws, "points")
        names = {s for s, *_ in live["points"]}
        assert series("group_lag", "billing") in names
        assert series("group_lag", "billing", "orders", 0) in names
        assert series("group_records", "billing") in names
        assert series("records_in", "orders") in names  # produce rate of what it reads
        assert series("records_in", "clicks") not in names  # a topic it does not read
        assert list(values(live, series("group_lag", "billing")).values()) == [6]
        await ws.disconnect()

    run(body)


def test_points_reach_the_socket_beside_a_redis_channel_layer_without_passing_through_it(
    broker, hub, clock, connect, login, viewer, settings, redis_url
):
    from brokerui.config import channel_layers

    settings.CHANNEL_LAYERS = channel_layers(redis_url)  # as brokerui.settings makes it
    import redis as redis_client
    from channels.layers import get_channel_layer

    redis = redis_client.Redis.from_url(redis_url)

    assert type(get_channel_layer()).__name__ == "RedisChannelLayer"

    headers = login(viewer)

    async def body():
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": 300_000})
        await receive(ws, "backfill")
        # idle past channels-redis's 5-s BZPOPMIN (nothing comes down the socket's channel):
        # with redis-py 8's default 5-s read timeout the socket was closed with 1011 here
        await asyncio.sleep(6.5)
        await asyncio.to_thread(produce, broker, "orders", 3)
        await next_second(hub, clock)
        live = await receive(ws, "points")
        assert list(values(live, series("records_in", "orders")).values()) == [3]
        # the hub, its chart stream and the socket share this process's loop: the windows
        # are handed over by a call, with no channel-layer group (channels-redis would keep
        # one as a sorted set "asgi:group:<name>") nor a Redis round trip per socket
        assert await asyncio.to_thread(redis.keys, "asgi:group:*") == []
        await ws.disconnect()

    run(body)


def test_the_broker_hub_pushes_real_windows(broker, connect, login, viewer):
    """No hand clock: the broker's own sampler closes a window each second."""
    assert broker.metrics is not None
    produce(broker, "orders", 3)

    headers = login(viewer)

    async def body():
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": 60_000})
        await receive(ws, "backfill")
        live = await receive(ws, "points")
        assert live["resolution"] == 1000
        assert series("records_in") in {s for s, *_ in live["points"]}
        await ws.disconnect()

    run(body)


def test_a_reconnect_gets_only_the_windows_since_the_last_one_it_had(
    broker, hub, clock, connect, login, viewer
):
    headers = login(viewer)
    produce(broker, "orders", 1)

    async def body():
        for n in (2, 3, 4):
            await asyncio.to_thread(produce, broker, "orders", n)
            await next_second(hub, clock)
        windows = [t for _s, t, *_ in hub.history(0, match=lambda s: s == "records_in")]
        ws = connect("/ws/metrics/", headers)  # a page that had everything up to windows[-2]
        assert (await ws.connect())[0]
        await ws.send_json_to(
            {"type": "subscribe", "scope": "overview", "range_ms": 300_000, "since": windows[-1]}
        )
        gap = await receive(ws, "backfill")
        assert values(gap, series("records_in")) == {windows[-1]: 4}
        await ws.disconnect()

    run(body)


def test_the_60_minute_range_gets_the_one_minute_rollups(
    broker, hub, clock, connect, login, viewer
):
    headers = login(viewer)

    async def body():
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": 3_600_000})
        assert (await receive(ws, "backfill"))["resolution"] == 60_000
        await asyncio.to_thread(produce, broker, "orders", 5)
        for _ in range(61):  # 1-second windows close each tick, but are not for this page
            await next_second(hub, clock)
        rollup = await receive(ws, "points")
        assert {w for _s, _t, w, *_rest in rollup["points"]} == {60_000}
        name = series("records_in", "orders")
        ((minute, total),) = values(rollup, name).items()
        # the hand clock started mid-minute: the rollup is the mean of the seconds measured × 60
        seconds = [p.v for p in hub.history(minute, minute + 60_000, match=lambda s: s == name)]
        assert sum(seconds) == 5
        assert total == pytest.approx(5 / len(seconds) * 60)
        await ws.disconnect()

    run(body)


def test_the_15_minute_range_gets_10_second_windows_of_averaged_rates(
    broker, hub, clock, connect, login, viewer
):
    """Not 900 one-second points: 10-second windows; a rate is the average of the seconds
    present (5 then 7 records a second: 6/s, sent as 60 per 10 s), and the open window is sent
    again as each second closes."""
    headers = login(viewer)

    async def body():
        clock.now += 10_000 - clock.now % 10_000  # the hand clock at the start of a window
        await asyncio.to_thread(produce, broker, "orders", 5)
        await next_second(hub, clock)
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": 900_000})
        backfill = await receive(ws, "backfill")
        assert (backfill["resolution"], backfill["range_ms"]) == (10_000, 900_000)
        window = clock.now - clock.now % 10_000  # the 10-second window of that second
        assert values(backfill, series("records_in", "orders")) == {window: 50}
        assert {w for _s, _t, w, *_rest in backfill["points"]} == {10_000}

        await asyncio.to_thread(produce, broker, "orders", 7)
        await next_second(hub, clock)
        live = await receive(ws, "points")
        assert values(live, series("records_in", "orders")) == {window: 60}  # (5 + 7) / 2 s
        assert finality(live, series("records_in", "orders")) == {window: "open"}  # 2 s of 10
        await ws.disconnect()

    run(body)


def test_the_6_hour_range_gets_5_minute_windows_from_the_rollups(
    broker, hub, clock, connect, login, viewer
):
    headers = login(viewer)

    async def body():
        clock.now += 60_000 - clock.now % 60_000  # at a minute's start: one whole minute closes
        await asyncio.to_thread(produce, broker, "orders", 6)
        for _ in range(61):
            await next_second(hub, clock)
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": 6 * 3600_000})
        backfill = await receive(ws, "backfill")
        assert backfill["resolution"] == 300_000
        name = series("records_in", "orders")
        got = values(backfill, name)
        assert len(got) == 1 and all(t % 300_000 == 0 for t in got)
        # 6 records in the one minute there is: 0.1/s, drawn as 0.1 × 300 s per window
        assert list(got.values()) == [pytest.approx(30)]
        await ws.disconnect()

    run(body)


def test_a_resumed_page_gets_its_open_10_second_window_whole(
    broker, hub, clock, connect, login, viewer
):
    """Hidden for two seconds of a 10-second window: on resume (from the window it last had,
    which was open), that window comes back with all its seconds averaged: (2 + 4 + 6) / 3 s."""
    headers = login(viewer)

    async def body():
        clock.now += 10_000 - clock.now % 10_000
        window = clock.now
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": 900_000})
        await receive(ws, "backfill")
        await asyncio.to_thread(produce, broker, "orders", 2)
        await next_second(hub, clock)
        assert values(await receive(ws, "points"), series("records_in", "orders")) == {window: 20}

        await ws.send_json_to({"type": "pause"})
        await receive(ws, "paused")
        for n in (4, 6):
            await asyncio.to_thread(produce, broker, "orders", n)
            await next_second(hub, clock)
        await ws.send_json_to({"type": "resume", "since": window})
        await receive(ws, "resumed")
        gap = await receive(ws, "backfill")
        assert values(gap, series("records_in", "orders")) == {window: 40}
        await ws.disconnect()

    run(body)


def test_the_jobs_page_gets_each_jobs_read_and_written_records(
    broker, hub, clock, connect, login, viewer
):
    """Scope ``jobs``: a job's records read (its group's commits) and written (its output
    topic's produce rate), and nothing else (not the produce rate of its input)."""
    import time

    from streams.jobs import JSON, Job
    from streams.jobs.embedded import JobSpec

    def doubler() -> Job:
        job = Job("doubler")
        job.stream("orders", value=JSON).map(lambda v: {"n": v["n"] * 2}).to("doubled")
        return job

    produce(broker, "orders", 4)
    broker.jobs.register(JobSpec("doubler", doubler))
    broker.jobs.start("doubler")
    headers = login(viewer)

    def processed(n: int) -> None:
        deadline = time.monotonic() + 20
        while broker.jobs.status("doubler").worker.records_out < n:
            assert time.monotonic() < deadline, "the job did not process its input"
            time.sleep(0.05)
        committed = broker.coordinator.committed("doubler")
        while sum(c.offset for c in committed.values()) < n:
            assert time.monotonic() < deadline, "the job did not commit"
            time.sleep(0.05)
            committed = broker.coordinator.committed("doubler")

    async def body():
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "jobs", "range_ms": 300_000})
        await receive(ws, "backfill")
        await asyncio.to_thread(processed, 4)
        await next_second(hub, clock)  # the group's first commits: the sampler's baseline
        await receive(ws, "points")
        await asyncio.to_thread(produce, broker, "orders", 3)
        await asyncio.to_thread(processed, 7)
        await next_second(hub, clock)
        live = await receive(ws, "points")
        names = {s for s, *_ in live["points"]}
        assert list(values(live, series("group_records", "doubler")).values()) == [3]
        assert list(values(live, series("records_in", "doubled")).values()) == [3]
        assert series("records_in", "orders") not in names  # the job's input: not drawn
        await ws.disconnect()

    try:
        run(body)
    finally:
        broker.jobs.stop("doubler")


def test_a_page_that_stops_reading_is_sent_a_bounded_amount_then_the_newest_state(
    broker, hub, clock, connect, login, viewer
):
    """Bad input (issue 27): a dashboard that stops reading. The server sends it at most
    MAX_IN_FLIGHT unacknowledged messages and keeps nothing for it after that — however long
    it stays stopped — and when it acknowledges it gets the newest state at once."""
    from brokerui.console.live.consumers import MAX_IN_FLIGHT

    headers = login(viewer)
    name = series("end_offset", "orders", 0)

    async def body():
        produce(broker, "orders", 2)
        await next_second(hub, clock)
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "topic", "name": "orders",
                               "range_ms": 300_000})  # fmt: skip
        messages = [await receive(ws, "backfill")]
        for _ in range(3 * MAX_IN_FLIGHT):  # the page reads nothing meanwhile
            clock.now += 5
            await asyncio.to_thread(produce, broker, "orders", 2)
            await asyncio.to_thread(hub.partial)
        await asyncio.sleep(0.5)
        while not await ws.receive_nothing(timeout=0.2):
            messages.append(await ws.receive_json_from())
        assert len(messages) == MAX_IN_FLIGHT  # and no more, however many updates there were
        assert [m["seq"] for m in messages] == list(range(1, MAX_IN_FLIGHT + 1))
        last_sent = max(values(messages[-1], name).values())
        newest = broker.store.offsets("orders", 0)[1]
        assert last_sent < newest  # what came after was dropped, not queued

        await ws.send_json_to({"type": "ack", "seq": messages[-1]["seq"]})
        caught_up = await receive(ws, "backfill")  # the newest state, in one message
        assert caught_up["seq"] == MAX_IN_FLIGHT + 1
        assert max(values(caught_up, name).values()) == newest
        await ws.send_json_to({"type": "ack", "seq": 10_000})
        assert (await ws.receive_json_from())["type"] == "error"  # an ack of nothing sent
        await ws.disconnect()

    run(body)


def test_sockets_of_one_scope_and_range_share_one_stream_and_get_the_same_windows(
    broker, hub, clock, connect, login, viewer
):
    """Issue 27: a batch is downsampled and encoded once per scope and resolution, not once
    per socket. A page that opens later still gets its open 10-second window whole (the shared
    stream was seeded from history, not started empty), the same text as the first page; a
    page at another range has its own stream."""
    from brokerui.console.live import relay

    headers = login(viewer)
    name = series("records_in", "orders")

    async def body():
        clock.now += 10_000 - clock.now % 10_000
        window = clock.now
        first = connect("/ws/metrics/", headers)
        assert (await first.connect())[0]
        await first.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": 900_000})
        await receive(first, "backfill")
        await asyncio.to_thread(produce, broker, "orders", 2)
        await next_second(hub, clock)
        assert values(await receive(first, "points"), name) == {window: 20}

        later, other = connect("/ws/metrics/", headers), connect("/ws/metrics/", headers)
        for ws, range_ms in ((later, 900_000), (other, 300_000)):
            assert (await ws.connect())[0]
            await ws.send_json_to({"type": "subscribe", "scope": "overview", "range_ms": range_ms})
        assert values(await receive(later, "backfill"), name) == {window: 20}
        assert values(await receive(other, "backfill"), name) == {window: 2}
        streams = relay._relays["metrics"].deliver.streams
        assert sorted((s.scope.kind, s.plan.step_ms, s.users) for s in streams.values()) == [
            ("overview", 1000, 1),
            ("overview", 10_000, 2),
        ]

        await asyncio.to_thread(produce, broker, "orders", 4)
        await next_second(hub, clock)
        a, b = await receive(first, "points"), await receive(later, "points")
        assert values(a, name) == values(b, name) == {window: 30}  # (2 + 4) / 2 s, × 10 s
        assert a["points"] == b["points"]  # one text, each socket's own seq spliced in
        assert (a["seq"], b["seq"]) == (3, 2)
        assert values(await receive(other, "points"), name) == {window + 1000: 4}

        for ws in (first, later, other):
            await ws.disconnect()
        await asyncio.sleep(0.05)
        assert not streams  # the last socket of a stream ends it

    run(body)
