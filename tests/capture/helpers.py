"""Reading what the capture wrote: whole topics through confluent-kafka, folded by key."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import psycopg2
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


def read_topic(
    bootstrap: str, topic: str, *, envelopes: bool = True, config: dict | None = None
) -> list[Record]:
    """Every record of partition 0 of `topic`, from offset 0 to its end (`envelopes`: values
    are change events, `value` their payload; else `value` is the whole JSON document);
    `config`: more client settings (a secured cluster's)."""
    consumer = Consumer(
        {
            **(config or {}),
            "bootstrap.servers": bootstrap,
            "group.id": "capture-test",
            "enable.auto.commit": False,
        }
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
                        (doc["payload"] if envelopes else doc) if doc else None,
                        doc["schema"] if doc and envelopes else None,
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


def execute(dsn: str, *statements: str) -> None:
    """Run statements in one transaction on a connection of their own."""
    conn = psycopg2.connect(dsn)
    with conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    conn.close()


def table_rows(
    dsn: str, table: str = "accounts", select: str = "row_to_json(t)"
) -> dict[str, dict]:
    """The table as {key: row}, each row as JSON (`select` over the table as ``t``), keyed as
    the capture keys it (``{"id": …}``)."""
    conn = psycopg2.connect(dsn)
    with conn.cursor() as cur:
        cur.execute(f"SELECT {select} FROM {table} t")
        rows = [r[0] for r in cur.fetchall()]
    conn.close()
    return {json.dumps({"id": r["id"]}, sort_keys=True): r for r in rows}


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


class Writer(threading.Thread):
    """Inserts, updates (version + 1) and deletes rows of its own key range, one transaction
    each (some of three changes), recording every committed change as (op, id, version): unique,
    as a key's versions go on counting after a delete."""

    def __init__(self, dsn: str, number: int, stop: threading.Event, existing: int = 0) -> None:
        super().__init__(daemon=True)
        self.dsn, self.stop = dsn, stop
        self.keys = range(number * 1000 + 1, number * 1000 + 40)
        self.rows: dict[int, int] = {}  # id -> version
        self.versions: dict[int, int] = {}  # id -> last version ever (a re-insert goes on)
        self.changes: list[tuple[str, int, int]] = []
        self.random = random.Random(number)
        self.error: BaseException | None = None
        for key in self.keys:  # rows 1..existing were there before (version 0)
            if key <= existing:
                self.rows[key] = self.versions[key] = 0

    def _one(self, cur) -> tuple[str, int, int]:
        key = self.random.choice(self.keys)
        version = self.rows.get(key)
        if version is None:
            version = self.versions.get(key, -1) + 1
            cur.execute(
                "INSERT INTO accounts VALUES (%s, %s, %s)", (key, version, "x" * (key % 50))
            )
            return ("c", key, version)
        if self.random.random() < 0.25:
            cur.execute("DELETE FROM accounts WHERE id = %s", (key,))
            return ("d", key, version)
        cur.execute("UPDATE accounts SET version = version + 1 WHERE id = %s", (key,))
        return ("u", key, version + 1)

    def run(self) -> None:
        try:
            conn = psycopg2.connect(self.dsn)
            while not self.stop.is_set():
                done = []
                with conn.cursor() as cur:
                    for _ in range(3 if self.random.random() < 0.2 else 1):
                        op, key, version = self._one(cur)
                        if op == "d":
                            del self.rows[key]
                        else:
                            self.rows[key] = self.versions[key] = version
                        done.append((op, key, version))
                conn.commit()
                self.changes.extend(done)
                time.sleep(self.random.random() / 500)
            conn.close()
        except BaseException as exc:
            self.error = exc


def events(records) -> list[tuple[str, int, int]]:
    """(op, id, version) of each event (a delete's from its before image), tombstones left out."""
    out = []
    for r in records:
        if r.value is None:
            continue
        row = r.value["before"] if r.value["op"] == "d" else r.value["after"]
        out.append((r.value["op"], row["id"], row["version"]))
    return out
