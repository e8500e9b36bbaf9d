"""A damaged segment under real clients and kill -9 (issue 10, item 5), with the broker in a
process of its own: a byte of a record value in the middle of the active segment is flipped
while the broker is stopped cleanly.

Before: the clean start noticed nothing, kcat received the garbled value, and after the next
kill -9 recovery cut the segment at the damage, deleting records acknowledged after the clean
restart. Now: the damage is found at the clean start (and logged), kcat and confluent-kafka get
CORRUPT_MESSAGE at the damaged offsets (librdkafka names code 2 INVALID_MSG, "Invalid
message") and every other record intact, and after kill -9 every
acknowledged record outside the damaged batch is still there."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka_servers import TidelogListener
from tests.log.segment_bytes import batches as _batches
from tests.system_programs import require_program

TOPIC = "damaged"
DEADLINE_S = 30


def _produce(bootstrap: str, values: list[bytes], per_batch: int = 5) -> None:
    """acks=all, `per_batch` records per request; every record must be acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50})
    errors = []
    for i in range(0, len(values), per_batch):
        for v in values[i : i + per_batch]:
            producer.produce(
                TOPIC, v, partition=0, on_delivery=lambda e, _m: e and errors.append(e)
            )
        assert producer.flush(DEADLINE_S) == 0
    assert errors == []


def _kcat(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", TOPIC, "-p", "0", "-e", "-f", "%o %s\n", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _consume(bootstrap: str, start: int, stop: int) -> list[tuple[int, bytes]]:
    """(offset, value) of [start, stop) through confluent-kafka (which, like every client by
    default, does not check CRCs: what it gets is what the broker serves)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, start)])
    out = []
    try:
        while not out or out[-1][0] < stop - 1:
            msg = consumer.poll(DEADLINE_S)
            assert msg is not None, f"nothing after {out[-1:]}"
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def _first_error(bootstrap: str, offset: int) -> KafkaError:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, offset)])
    try:
        msg = consumer.poll(DEADLINE_S)
        assert msg is not None and msg.error() is not None, msg and msg.value()
        return msg.error()
    finally:
        consumer.close()


@pytest.fixture(autouse=True)
def _kcat_installed():
    require_program("kcat")


def test_damage_is_refused_to_clients_and_survives_kill_9_without_losing_acks(tmp_path):
    data = str(tmp_path / "data")
    server = TidelogListener(data, log_level="INFO")
    server.start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        # one index entry per MiB: recovery re-validates the active segment from its start
        config = {"index.interval.bytes": str(1 << 20)}
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=config)])[TOPIC].result(DEADLINE_S)
        del admin  # (it would keep reconnecting while the broker is down)
        before = [b"before-%04d-" % i + b"v" * 30 for i in range(100)]
        _produce(server.bootstrap, before)
        server.stop()  # a clean shutdown (SIGTERM)

        segment = os.path.join(data, f"{TOPIC}-0", f"{0:020d}.log")
        pos, size, first, end = _batches(segment)[10]  # in the middle of the active segment
        with open(segment, "r+b") as f:  # a byte of the batch's last record value
            f.seek(pos + size - 3)
            byte = f.read(1)
            f.seek(pos + size - 3)
            f.write(bytes([byte[0] ^ 0x5A]))

        server.start()  # a clean start finds it
        assert f"damaged log: offsets {first}..{end - 1}" in server.log_tail(200)
        done = _kcat(server.bootstrap, "-o", "beginning")
        assert done.returncode != 0 and "Broker: Invalid message" in done.stderr, done.stderr
        served = [line.split(" ", 1) for line in done.stdout.splitlines()]
        assert [(int(o), v.encode()) for o, v in served] == list(enumerate(before))[:first]
        error = _first_error(server.bootstrap, first)
        assert error.code() == KafkaError.INVALID_MSG, error
        assert _consume(server.bootstrap, end, 100) == list(enumerate(before))[end:]

        after = [b"after-%04d-" % i + b"w" * 30 for i in range(60)]
        _produce(server.bootstrap, after)  # acknowledged after the clean restart
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        server.process = None

        server.start()  # recovery after kill -9
        everything = list(enumerate(before + after))
        assert _consume(server.bootstrap, 0, first) == everything[:first]
        assert _consume(server.bootstrap, end, 160) == everything[end:]
        assert _first_error(server.bootstrap, first).code() == KafkaError.INVALID_MSG
    finally:
        server.stop()
