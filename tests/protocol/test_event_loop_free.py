"""Requirement (issue 12, item 5): blocking work leaves the listener's event loop. While a
topic auto-created by a Produce, or the fsync of a segment sealed by a roll, is held up by a
slow disk, another connection is still answered — and the held-up Produce, and the requests
pipelined behind it on its connection, complete in order once the disk goes on.

The slow disk is injected, not timed: the fsync (``LogSegment.flush`` of the sealed segment)
or the metadata write of the new topic (``checkpoint.write_atomic``) waits on an Event the test
sets. A loop blocked by it could not answer the second connection at all (its receive would
time out while the disk is held), so each test fails on a listener that does this work inline.
"""

from __future__ import annotations

import threading

import pytest

from streams.log import checkpoint
from streams.log.segment import LogSegment
from tests.protocol.test_produce_fetch_wire import PRODUCE, P, batch
from tests.protocol.wire import WireClient

API_VERSIONS, METADATA = 18, 3
HELD_S = 60  # how long the injected slow disk holds at most (a stuck test ends, never passes)


class SlowDisk:
    """Holds the calls whose path contains `where` until `release()`."""

    def __init__(self, where: str):
        self.where = where
        self.entered = threading.Event()
        self._go = threading.Event()

    def hold(self, path: str) -> None:
        if self.where in path:
            self.entered.set()
            self._go.wait(HELD_S)

    def release(self) -> None:
        self._go.set()


def _produce_fields(topic: str, data: bytes) -> dict:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [
            P.TopicProduceData(
                name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(0, data)]
            )
        ],
    }


def _answered_meanwhile(bootstrap: str) -> None:
    """A second connection gets its ApiVersions and Metadata answers (the loop is free)."""
    with WireClient(bootstrap, timeout=20) as other:
        assert other.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        assert other.call(METADATA, 9, topics=None, allow_auto_topic_creation=False).brokers


@pytest.fixture
def slow_sealed_fsync(monkeypatch):
    disk = SlowDisk("roll-0")
    original = LogSegment.flush

    def flush(self):
        disk.hold(self.path)
        original(self)

    monkeypatch.setattr(LogSegment, "flush", flush)
    yield disk
    disk.release()


@pytest.fixture
def slow_topic_metadata(monkeypatch):
    disk = SlowDisk("auto-made")
    original = checkpoint.write_atomic

    def write_atomic(path, data, *args, **kwargs):
        disk.hold(str(path))
        return original(path, data, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "write_atomic", write_atomic)
    yield disk
    disk.release()


def test_a_roll_fsync_held_by_the_disk_does_not_stop_the_loop(broker, bootstrap, slow_sealed_fsync):
    broker.store.create_topic("roll", 1, {"segment.bytes": "1024"})
    with WireClient(bootstrap) as c:
        first = c.call(PRODUCE, 9, **_produce_fields("roll", batch([b"a" * 700])))
        assert first.responses[0].partition_responses[0].error_code == 0
        # the next batch does not fit: the append rolls, and the sealed segment needs an fsync
        c.send(PRODUCE, 9, **_produce_fields("roll", batch([b"b" * 700])))
        c.send(PRODUCE, 9, **_produce_fields("roll", batch([b"c" * 10])))  # pipelined behind
        assert slow_sealed_fsync.entered.wait(HELD_S)
        _answered_meanwhile(bootstrap)
        slow_sealed_fsync.release()
        answers = [c.recv(PRODUCE, 9).responses[0].partition_responses[0] for _ in range(2)]
    assert [(a.error_code, a.base_offset) for a in answers] == [(0, 1), (0, 2)]
    values = [r.value for r in broker.store.read("roll", 0, 0)]
    assert values == [b"a" * 700, b"b" * 700, b"c" * 10]
    assert broker.store.describe_topic("roll").partitions[0].segment_count == 2


def test_a_topic_auto_created_on_produce_does_not_stop_the_loop(
    broker, bootstrap, slow_topic_metadata
):
    with WireClient(bootstrap) as c:
        c.send(PRODUCE, 9, **_produce_fields("auto-made", batch([b"first"])))
        c.send(PRODUCE, 9, **_produce_fields("auto-made", batch([b"second"])))  # pipelined
        assert slow_topic_metadata.entered.wait(HELD_S)
        _answered_meanwhile(bootstrap)
        slow_topic_metadata.release()
        answers = [c.recv(PRODUCE, 9).responses[0].partition_responses[0] for _ in range(2)]
    assert [(a.error_code, a.base_offset) for a in answers] == [(0, 0), (0, 1)]
    assert [r.value for r in broker.store.read("auto-made", 0, 0)] == [b"first", b"second"]
