"""Produce and Fetch at the byte level: idempotent sequences (retries acknowledged with their
original offsets, gaps refused, state kept across a restart), acks=0, fetch long-polling, and
never-reused producer ids."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import crc32c

from streams.log import records as rb
from streams.log.records import ProducerRecord
from streams.protocol import codec
from tests.protocol.conftest import open_broker
from tests.protocol.wire import WireClient

PRODUCE, FETCH, INIT_PID = 0, 1, 22
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
P = codec.request_class(PRODUCE)
F = codec.request_class(FETCH)


def batch(values: list[bytes], pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    records = [ProducerRecord(v, b"key") for v in values]
    return rb.build_batch(
        records, now_ms=1_700_000_000_000, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def produce(client: WireClient, topic: str, data: bytes, acks: int = -1, version: int = 9):
    fields = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [
            P.TopicProduceData(
                name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(0, data)]
            )
        ],
    }
    if acks == 0:
        return client.send(PRODUCE, version, **fields)
    resp = client.call(PRODUCE, version, **fields)
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def fetch_request(topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            F.FetchTopic(
                topic=topic,
                partitions=[
                    F.FetchTopic.FetchPartition(
                        partition=0,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def init_pid(client: WireClient) -> int:
    resp = client.call(INIT_PID, 4, transactional_id=None, transaction_timeout_ms=60000)
    assert resp.error_code == 0
    return resp.producer_id


def test_retries_get_their_original_offsets_and_gaps_are_refused(broker, bootstrap):
    broker.store.create_topic("idem", 1)
    with WireClient(bootstrap) as c:
        pid = init_pid(c)
        first = batch([b"a", b"b", b"c"], pid, 0, 0)
        assert produce(c, "idem", first) == (0, 0)
        assert produce(c, "idem", batch([b"d"], pid, 0, 3)) == (0, 3)
        assert produce(c, "idem", first) == (0, 0)  # a retry: same offsets, not stored again
        assert produce(c, "idem", batch([b"x"], pid, 0, 7))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "idem", batch([b"e"], pid, 0, 4)) == (0, 4)
    values = [r.value for r in broker.store.read("idem", 0, 0)]
    assert values == [b"a", b"b", b"c", b"d", b"e"]


def test_producer_state_and_ids_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    broker = open_broker(data)
    host, port = broker.kafka_address
    with WireClient(f"{host}:{port}") as c:
        pid = init_pid(c)
        produce(c, "kept", batch([b"1", b"2"], pid, 0, 0))
        produce(c, "kept", batch([b"3"], pid, 0, 2))
    broker.close()
    for snapshot_lost in (False, True):  # the second time, recover from the log tail alone
        if snapshot_lost:
            (data / "kept-0" / "producer-state.json").unlink()
        broker = open_broker(data)
        host, port = broker.kafka_address
        try:
            with WireClient(f"{host}:{port}") as c:
                assert produce(c, "kept", batch([b"3"], pid, 0, 2)) == (0, 2)
                assert produce(c, "kept", batch([b"9"], pid, 0, 5))[0] == 45
                assert init_pid(c) > pid  # never handed out twice
        finally:
            broker.close()
    assert [r.value for r in broker_values(data, "kept")] == [b"1", b"2", b"3"]


def broker_values(data, topic: str):
    from streams.log import LogStore

    with LogStore.open(data, background=False) as store:
        return store.read(topic, 0, 0)


def test_acks_zero_gets_no_response_and_responses_keep_request_order(broker, bootstrap):
    broker.store.create_topic("fire", 1)
    with WireClient(bootstrap) as c:
        produce(c, "fire", batch([b"a"]), acks=0)
        produce(c, "fire", batch([b"b"]), acks=0)
        # pipelined: many requests written before any response is read
        ids = [c.send(3, 1, topics=None) for _ in range(200)]
        got = [c.recv(3, 1).header.correlation_id for _ in ids]
        assert got == ids
    assert [r.value for r in broker.store.read("fire", 0, 0)] == [b"a", b"b"]


def test_fetch_long_poll_wakes_on_append(broker, bootstrap):
    broker.store.create_topic("poll", 1)
    with WireClient(bootstrap) as c:
        # waits for data (max 60 s): an append from another thread must wake it
        correlation = c.send(FETCH, 11, **fetch_request("poll", 0, max_wait_ms=60_000))
        timer = threading.Timer(0.3, lambda: broker.store.append("poll", b"wake up"))
        timer.start()
        resp = c.recv(FETCH, 11)
        timer.join()
    assert resp.header.correlation_id == correlation
    part = resp.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, part.last_stable_offset) == (0, 1, 1)
    assert [r.value for r in rb.decode_records(part.records)] == [b"wake up"]


def test_fetch_returns_whole_batches_from_the_one_containing_the_offset(broker, bootstrap):
    broker.store.create_topic("whole", 1)
    broker.store.append_raw("whole", 0, batch([b"0", b"1", b"2"]))
    broker.store.append_raw("whole", 0, batch([b"3", b"4"]))
    with WireClient(bootstrap) as c:
        resp = c.call(FETCH, 12, **fetch_request("whole", 1, max_wait_ms=0))
        part = resp.responses[0].partitions[0]
        h = rb.parse_header(part.records)
        assert (h.base_offset, h.count) == (0, 3)  # starts with the batch holding offset 1
        offsets = []
        pos = 0
        while pos < len(part.records):
            h = rb.parse_header(part.records, pos)
            offsets += [r.offset for r in rb.decode_records(part.records[pos : pos + h.size])]
            pos += h.size
        assert offsets == [0, 1, 2, 3, 4]
        out_of_range = c.call(FETCH, 12, **fetch_request("whole", 9, max_wait_ms=0))
        assert out_of_range.responses[0].partitions[0].error_code == 1


def test_fetch_max_bytes_returns_one_batch_then_only_offsets(broker, bootstrap):
    broker.store.create_topic("budget", 2)
    big = [b"x" * 2000] * 3
    for p in (0, 1):
        broker.store.append_raw("budget", p, batch(big))
        broker.store.append_raw("budget", p, batch(big))
    req = fetch_request("budget", 0, max_wait_ms=0)
    partition_cls = F.FetchTopic.FetchPartition
    req["topics"][0].partitions = [
        partition_cls(partition=p, fetch_offset=0, log_start_offset=-1, partition_max_bytes=100)
        for p in (0, 1)
    ]
    req["max_bytes"] = 100
    with WireClient(bootstrap) as c:
        parts = c.call(FETCH, 12, **req).responses[0].partitions
    first = rb.parse_header(parts[0].records)
    assert (len(parts[0].records), first.count) == (first.size, 3)  # one whole batch (KIP-74)
    assert (parts[1].records, parts[1].high_watermark) == (b"", 6)  # over budget: offsets only


def test_invalid_batches_are_refused_and_nothing_is_stored(broker, bootstrap):
    broker.store.create_topic("strict", 1, {"cleanup.policy": "compact"})
    good = batch([b"ok"])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # inside the CRC-covered records
    wrong_count = bytearray(good)
    wrong_count[57:61] = (5).to_bytes(4, "big")  # records count != lastOffsetDelta + 1 ...
    wrong_count[17:21] = crc32c.crc32c(bytes(wrong_count[21:])).to_bytes(4, "big")  # valid CRC
    keyless = rb.build_batch([ProducerRecord(b"no key")], now_ms=1_700_000_000_000)
    with WireClient(bootstrap) as c:
        assert produce(c, "strict", bytes(corrupt))[0] == 2  # CORRUPT_MESSAGE
        assert produce(c, "strict", bytes(wrong_count))[0] == 2
        assert produce(c, "strict", good[:-3])[0] == 2  # truncated
        assert produce(c, "strict", keyless)[0] == 87  # INVALID_RECORD: compacted needs keys
        assert produce(c, "strict", good, acks=2)[0] == 21  # INVALID_REQUIRED_ACKS
        assert produce(c, "strict", good) == (0, 0)
    assert [r.value for r in broker.store.read("strict", 0, 0)] == [b"ok"]


def test_old_message_format_versions_are_answered_with_unsupported_version(broker, bootstrap):
    """Produce v0-2 and Fetch v0-3 are advertised (Debian's kcat enables compression and
    other features only when they are in range) but carry message formats v0/v1: refused."""
    broker.store.create_topic("old", 1)
    broker.store.append("old", b"v2 only")
    with WireClient(bootstrap) as c:
        assert produce(c, "old", batch([b"x"]), version=2)[0] == 35
        req = fetch_request("old", 0, max_wait_ms=0)
        resp = c.call(
            FETCH,
            3,
            **{
                k: req[k] for k in ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "topics")
            },
        )
        assert resp.responses[0].partitions[0].error_code == 35
        assert produce(c, "old", batch([b"y"])) == (0, 1)  # the connection still serves


def _start_process(data: Path) -> tuple[subprocess.Popen, str]:
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.protocol", "--data-dir", str(data), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    return proc, proc.stdout.readline().strip().removeprefix("listening on ")


def test_retry_after_a_broker_crash_gets_its_original_offsets(tmp_path):
    """SIGKILL (no snapshot at close): the producer state comes back from the log tail."""
    data = tmp_path / "data"
    proc, bootstrap = _start_process(data)
    try:
        with WireClient(bootstrap) as c:
            pid = init_pid(c)
            for seq in range(0, 30, 3):
                assert produce(c, "crashy", batch([b"a", b"b", b"c"], pid, 0, seq)) == (0, seq)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    proc, bootstrap = _start_process(data)
    try:
        with WireClient(bootstrap) as c:
            # the last batch, retried because its acknowledgement was lost in the crash
            assert produce(c, "crashy", batch([b"a", b"b", b"c"], pid, 0, 27)) == (0, 27)
            assert produce(c, "crashy", batch([b"d"], pid, 0, 31))[0] == 45  # a gap
            assert produce(c, "crashy", batch([b"d"], pid, 0, 30)) == (0, 30)
            assert init_pid(c) > pid
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_a_record_set_of_several_batches_is_stored_whole_or_not_at_all(broker, bootstrap):
    broker.store.create_topic("multi", 1)
    first, second = batch([b"1", b"2"]), batch([b"3"])
    broken = bytearray(second)
    broken[-1] ^= 0x01
    with WireClient(bootstrap) as c:
        assert produce(c, "multi", first + bytes(broken))[0] == 2  # second batch corrupt
        assert broker.store.offsets("multi", 0) == (0, 0)  # the first was not written either
        assert produce(c, "multi", first + second) == (0, 0)
    assert [r.value for r in broker.store.read("multi", 0, 0)] == [b"1", b"2", b"3"]


def test_a_sequence_gap_in_a_later_batch_stores_none_of_the_set(broker, bootstrap):
    """Every batch of a partition's record set passes the idempotence checks before the first
    is written: a gap after the stored state, or between two batches of the same request,
    refuses the whole set."""
    broker.store.create_topic("idem-multi", 1)
    with WireClient(bootstrap) as c:
        pid = init_pid(c)
        assert produce(c, "idem-multi", batch([b"a"], pid, 0, 0)) == (0, 0)
        ok = batch([b"b", b"c"], pid, 0, 1)
        gap_inside = ok + batch([b"x"], pid, 0, 4)  # the set's first batch ends at 2: 3 next
        gap_from_state = batch([b"y"], pid, 0, 5) + ok  # the first batch is the one out of order
        assert produce(c, "idem-multi", gap_inside)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "idem-multi", gap_from_state)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert broker.store.offsets("idem-multi", 0) == (0, 1)  # nothing of either set stored
        continuous = ok + batch([b"d"], pid, 0, 3)
        assert produce(c, "idem-multi", continuous) == (0, 1)
        assert produce(c, "idem-multi", batch([b"e"], pid, 0, 4)) == (0, 4)  # state follows
    values = [r.value for r in broker.store.read("idem-multi", 0, 0)]
    assert values == [b"a", b"b", b"c", b"d", b"e"]


def test_a_later_batch_over_the_size_limit_stores_none_of_the_set(broker, bootstrap):
    broker.store.create_topic("small", 1, {"max.message.bytes": "200"})
    small, big = batch([b"s"]), batch([b"x" * 300])
    with WireClient(bootstrap) as c:
        assert produce(c, "small", small + big)[0] == 10  # MESSAGE_TOO_LARGE
        assert broker.store.offsets("small", 0) == (0, 0)
        assert produce(c, "small", small) == (0, 0)


def test_a_later_keyless_batch_on_a_compacted_topic_stores_none_of_the_set(broker, bootstrap):
    broker.store.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    keyless = rb.build_batch([ProducerRecord(b"no key")], now_ms=1_700_000_000_000)
    with WireClient(bootstrap) as c:
        assert produce(c, "compacted", batch([b"k"]) + keyless)[0] == 87  # INVALID_RECORD
        assert broker.store.offsets("compacted", 0) == (0, 0)


def _miscounted(values: list[bytes], declared: int) -> bytes:
    """A batch of `values` whose header declares `declared` records, consistently (count and
    lastOffsetDelta) and under a valid CRC: only counting the body can tell."""
    out = bytearray(batch(values))
    out[23:27] = (declared - 1).to_bytes(4, "big")  # lastOffsetDelta
    out[57:61] = declared.to_bytes(4, "big")  # records count
    out[17:21] = crc32c.crc32c(bytes(out[21:])).to_bytes(4, "big")
    return bytes(out)


def test_a_batch_holding_more_or_fewer_records_than_it_declares_is_refused(broker, bootstrap):
    broker.store.create_topic("counted", 1)
    with WireClient(bootstrap) as c:
        assert produce(c, "counted", _miscounted([b"a", b"b", b"c"], 1))[0] == 2  # CORRUPT
        assert produce(c, "counted", _miscounted([b"a"], 3))[0] == 2
        # in a set of several batches, nothing of the set is stored either
        assert produce(c, "counted", batch([b"ok"]) + _miscounted([b"a", b"b"], 1))[0] == 2
        assert broker.store.offsets("counted", 0) == (0, 0)
        assert produce(c, "counted", batch([b"a", b"b", b"c"])) == (0, 0)
    assert [r.value for r in broker.store.read("counted", 0, 0)] == [b"a", b"b", b"c"]
