"""``KafkaLog``'s at-least-once checkpoint against a real broker (Tidelog's Kafka listener):
a record the broker refuses aborts the task's checkpoint (the runner rewinds it), although
the producer reports only failed deliveries; a checkpoint whose records all arrive does not."""

from __future__ import annotations

import pytest

from streams.jobs.kafka import KafkaLog
from streams.jobs.logs import TaskCheckpoint
from streams.log.records import ProducerRecord
from tests.kafka_servers import record_consumer_configs
from tests.protocol.conftest import open_broker


@pytest.fixture
def bootstrap(tmp_path):
    b = open_broker(tmp_path / "data")
    b.store.create_topic("small", 1, {"max.message.bytes": "2000"})
    host, port = b.kafka_address
    yield f"{host}:{port}"
    b.close()


def test_a_refused_record_aborts_the_at_least_once_checkpoint(bootstrap):
    log = KafkaLog(bootstrap, client_config={"message.timeout.ms": 20_000})
    try:
        log.claim([0])  # at-least-once: makes the worker's producer
        too_big = [ProducerRecord(b"x" * 10_000, b"k", (), None)]
        assert log.checkpoint("g", {0: TaskCheckpoint({("small", 0): too_big}, {})}) == {0}
        fine = [ProducerRecord(b"y" * 100, b"k", (), None)]
        assert log.checkpoint("g", {0: TaskCheckpoint({("small", 0): fine}, {})}) == set()
    finally:
        log.close()
        del log  # its clients go before the broker does (no reconnect noise)


def test_every_consumer_fetches_again_soon_after_its_queue_was_full(bootstrap, monkeypatch):
    """librdkafka waits ``fetch.queue.backoff.ms`` (1000 by default) before it fetches a
    partition whose fetched queue was full (100,000 records): a worker that drains that in
    a fraction of a second then idled for the rest of it. Every consumer a ``KafkaLog`` makes
    (the group's, the restorer, the global reader) gets ``FETCH_DEFAULTS`` unless the client
    config says otherwise."""
    import streams.jobs.kafka as kafka

    made = record_consumer_configs(monkeypatch, kafka)
    assert kafka.FETCH_DEFAULTS == {"fetch.queue.backoff.ms": 20}
    log = KafkaLog(bootstrap)
    try:
        log.join("g", ["small"], lambda tps: None, lambda tps: None, lambda tps: None)
        list(log.restore("small", 0))  # the restorer (reads the empty partition)
        log._global_reader()
    finally:
        log.close()
    assert len(made) == 3
    assert all(c["fetch.queue.backoff.ms"] == 20 for c in made), made
    made.clear()
    log = KafkaLog(bootstrap, client_config={"fetch.queue.backoff.ms": 250})
    try:
        log.join("g", ["small"], lambda tps: None, lambda tps: None, lambda tps: None)
        list(log.restore("small", 0))
    finally:
        log.close()
    assert [c["fetch.queue.backoff.ms"] for c in made] == [250, 250]
