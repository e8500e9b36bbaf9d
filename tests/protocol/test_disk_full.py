"""A full disk under real producers (issue 10, item 4): the broker's data directory lives on a
small tmpfs that a filler file fills. A produce the disk refuses is answered with
KAFKA_STORAGE_ERROR for that partition (the connection stays up, the partial batch is cut back,
one clear line is logged), and once the filler is gone the same producer's writes succeed
again by themselves; the log then holds exactly the acknowledged records, in order.

Before the fix the short write raised OSError out of the Produce handler: the connection was
closed with a traceback and producers saw only time-outs."""

from __future__ import annotations

import logging
import subprocess

import pytest
from confluent_kafka import KafkaError, Producer

from tests.protocol.conftest import open_broker
from tests.small_disk import fill, small_tmpfs
from tests.system_programs import require_program

DISK_BYTES = 8 * 1024 * 1024
DEADLINE_S = 30


@pytest.fixture
def disk(tmp_path):
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as path:
        yield path


@pytest.fixture
def full_broker(disk):
    broker = open_broker(disk / "data")
    broker.store.create_topic("full", 2)
    yield broker
    broker.close()


def _bootstrap(broker) -> str:
    host, port = broker.kafka_address
    return f"{host}:{port}"


def _value(i: int) -> bytes:
    return b"%06d:" % i + b"x" * 4000


def _produce_each(producer: Producer, numbers, partition: int = 0) -> dict[int, KafkaError]:
    """Produce one record per request (flushing each): {number: error} of the refused ones."""
    refused: dict[int, KafkaError] = {}
    for i in numbers:

        def report(err, _msg, i=i):
            if err is not None:
                refused[i] = err

        producer.produce("full", _value(i), partition=partition, on_delivery=report)
        assert producer.flush(DEADLINE_S) == 0
    return refused


def _stored(store, partition: int = 0) -> list[bytes]:
    start, end = store.offsets("full", partition)
    out, offset = [], start
    while offset < end:
        got = store.read("full", partition, offset, max_records=1000, max_bytes=1 << 30)
        out += [r.value for r in got]
        offset = got[-1].offset + 1
    return out


def test_full_disk_answers_kafka_storage_error_and_recovers_by_itself(disk, full_broker, caplog):
    bootstrap = _bootstrap(full_broker)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "linger.ms": 0}
    )
    assert _produce_each(producer, range(5)) == {}
    filler = fill(disk, 48 * 1024)

    with caplog.at_level(logging.INFO):
        refused = _produce_each(producer, range(5, 45))
        assert refused, "the disk never filled"
        codes = {err.code() for err in refused.values()}
        assert codes == {KafkaError.KAFKA_STORAGE_ERROR}, refused

        filler.unlink()  # space returns: the same producer goes on, nothing to restart
        assert _produce_each(producer, range(45, 60)) == {}

    acked = [i for i in range(60) if i not in refused]
    assert _stored(full_broker.store) == [_value(i) for i in acked]
    lines = [r for r in caplog.records if "full-0" in r.getMessage()]
    refusals = [r for r in lines if r.levelno == logging.WARNING]
    assert len(refusals) == 1, [r.getMessage() for r in lines]
    assert "No space left on device" in refusals[0].getMessage()
    assert refusals[0].exc_info is None  # one line, no traceback
    assert any(r.levelno == logging.INFO and "again" in r.getMessage() for r in lines)
    assert not [r for r in caplog.records if "closing Kafka connection" in r.getMessage()]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text

    # and the log is whole on disk: a reopened store reads the same
    path = full_broker.store.path
    full_broker.close()
    reopened = open_broker(path)
    try:
        assert _stored(reopened.store) == [_value(i) for i in acked]
    finally:
        reopened.close()


def test_kcat_is_told_the_disk_is_full_and_its_next_run_succeeds(disk, full_broker):
    require_program("kcat")
    bootstrap = _bootstrap(full_broker)
    filler = fill(disk, 16 * 1024)
    lines = "".join(f"k{i}:{'v' * 3000}{i}\n" for i in range(20))
    done = subprocess.run(
        ["kcat", "-b", bootstrap, "-P", "-t", "full", "-p", "1", "-K:", "-X", "retries=0"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Broker: Disk error when trying to access log file on disk" in done.stderr, done.stderr
    stored_before = len(_stored(full_broker.store, 1))

    filler.unlink()
    subprocess.run(
        ["kcat", "-b", bootstrap, "-P", "-t", "full", "-p", "1", "-K:"],
        input="last:one\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    stored = _stored(full_broker.store, 1)
    assert len(stored) == stored_before + 1 and stored[-1] == b"one"
