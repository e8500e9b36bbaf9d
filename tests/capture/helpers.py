"""Reading what the capture wrote: whole topics through confluent-kafka, folded by key."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams.capture.postgres import POSITION_HEADER, PostgresCapture
from tests.kafka_servers import REPO_ROOT

DEADLINE_S = 60


@dataclass
class Record:
    offset: int
    key: dict | None
    value: dict | None  # the envelope's payload (None: a tombstone)
    schema: dict | None
    position: str | None


def read_topic(bootstrap: str, topic: str) -> list[Record]:
    """Every record of partition 0 of `topic`, from offset 0 to its end."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "capture-test", "enable.auto.commit": False}
    )
    try:
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        except KafkaException:  # not created yet
            return []
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[Record] = []
        deadline = time.monotonic() + DEADLINE_S
        while (not out or out[-1].offset < high - 1) and high > 0:
            assert time.monotonic() < deadline, f"read {len(out)} of {high} records of {topic}"
            for m in consumer.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                doc = json.loads(m.value()) if m.value() is not None else None
                headers = dict(m.headers() or [])
                out.append(
                    Record(
                        m.offset(),
                        json.loads(m.key()) if m.key() is not None else None,
                        doc["payload"] if doc else None,
                        doc["schema"] if doc else None,
                        (headers.get(POSITION_HEADER) or b"").decode() or None,
                    )
                )
        return out
    finally:
        consumer.close()


def fold(records: list[Record]) -> dict[str, dict]:
    """The compacted state: the last value per key, tombstones deleting (key as JSON text)."""
    state: dict[str, dict] = {}
    for r in records:
        key = json.dumps(r.key, sort_keys=True)
        if r.value is None:
            state.pop(key, None)
        elif r.value["op"] != "d":
            state[key] = r.value["after"]
    return state


def wait_for(predicate, what: str, timeout: float = DEADLINE_S):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def slot_for(dsn: str) -> str:
    """A slot name of the test's own (slots are per server, the tests' databases per test)."""
    return "tidelog_" + dsn.split("dbname=")[1]


class CaptureThread:
    """A `PostgresCapture` running in a thread of the test process (stopped cleanly on exit)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("slot", slot_for(kwargs["dsn"]))
        self.capture = PostgresCapture(**kwargs)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.capture.run()
        except BaseException as exc:  # surfaced by the test
            self.error = exc
            self.capture.ready.set()

    def __enter__(self) -> PostgresCapture:
        self.thread.start()
        assert self.capture.ready.wait(DEADLINE_S)
        if self.error:
            raise self.error
        return self.capture

    def __exit__(self, *exc) -> None:
        self.capture.stop()
        self.thread.join(DEADLINE_S)
        if self.error and exc[0] is None:
            raise self.error


def capture_command(dsn: str, tables: str, bootstrap: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "streams.capture", "postgres",
        "--dsn", dsn, "--tables", tables, "--bootstrap", bootstrap, *extra,
    ]  # fmt: skip


def run_capture(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        capture_command(*args), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, **kwargs
    )
