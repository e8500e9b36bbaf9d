"""Helpers for the crash tests of transactions: a Tidelog listener process on a fixed port that
can be killed with SIGKILL and restarted on the same data directory, and a read_committed reader
of whole partitions (confluent-kafka)."""

from __future__ import annotations

import os
import signal
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka_servers import TidelogListener, free_port

TIMEOUT_S = 60


class CrashableListener(TidelogListener):
    """Tidelog's listener in its own process, on one port for its whole life, so clients
    reconnect to it after ``crash_and_restart()`` (SIGKILL, then a start on the same data)."""

    def __init__(self, data_dir: str, flush: str = "fsync"):
        """`flush`: the listener's ``--flush`` policy (fsync, its default, or kafka)."""
        self.fixed_port = free_port()
        super().__init__(
            data_dir,
            extra_args=(
                "--port", str(self.fixed_port), "--initial-rebalance-delay-ms", "0",
                "--flush", flush,
            ),
        )  # fmt: skip

    def kill(self) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=TIMEOUT_S)

    def crash_and_restart(self) -> None:
        self.kill()
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # the port can stay busy for a moment after the kill
            try:
                self.start()
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def create_topics(bootstrap: str, partitions: int, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)


def read_partitions(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_committed",
    with_offsets: bool = False,
) -> dict[int, list]:
    """Every readable value of each partition of `topic`, in offset order (as (offset, value)
    with `with_offsets`), up to the end the broker gives for the isolation level
    (read_committed: the last stable offset, so records of a transaction still open are not
    read)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{os.getpid()}",
        "isolation.level": isolation, "enable.auto.commit": False,
        "enable.partition.eof": True,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: dict[int, list] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT_S
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {set(got) - at_end} not read to the end")
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is None:
                    item = (m.offset(), m.value()) if with_offsets else m.value()
                    got[m.partition()].append(item)
                    at_end.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise KafkaException(m.error())
        return got
    finally:
        consumer.close()
