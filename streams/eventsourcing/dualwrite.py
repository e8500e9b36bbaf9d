"""The dual-write race (DDIA ch. 11, "Keeping Systems in Sync"), run for real.

Two writers, A and B, update the same keys of two stores: a database (a SQLite table) and a
search index (a SQLite FTS5 inverted index, a separate file). In every round both writers set
the same key, A to ``A<round>`` and B to ``B<round>``.

- **direct** mode: each writer makes two separate writes, first the database, then the index.
  If A writes the database, then B writes the database and the index, then A writes the index,
  the database holds B's value and the index A's: the stores diverge, and nothing will ever
  repair that key.
- **log** mode: each writer makes one write, an append to a topic of a Tidelog log (one
  partition: one total order); two consumers read the topic in order and apply it, one to the
  database, one to the index. Whatever the interleaving of the writers, both stores apply the
  same writes in the same order and end equal.

- **cdc** mode (when a PostgreSQL and a Kafka-protocol broker are at hand): the database is a
  PostgreSQL table; each writer makes one write, an upsert into it; change data capture
  (``streams.capture``: logical decoding, Debezium envelopes, one compacted topic) carries the
  table's changes into the log in commit order, and a consumer applies them to the index. The
  database *is* the order, and the index follows it.

The log mode needs nothing but Tidelog, so it runs anywhere; the console page runs the cdc mode
when it is configured with a PostgreSQL and says which one it ran.

How the two writes of a writer interleave with the other's is decided by an ``Interleaving``:
``RandomPauses`` lets real threads race (a writer pauses a random fraction of a millisecond
between its two writes, as a request handler does between two network calls), and
``ForcedInterleaving`` forces, with the same threads, the schedule that diverges every round —
what a test needs to show the divergence without relying on luck.

Thread-safety: one ``DualWriteRace`` runs one mode at a time; ``progress()`` may be read from
any thread while it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from streams.errors import InvalidConfig
from streams.librdkafka import FETCH_DEFAULTS
from streams.log.store import LogStore

WRITERS = ("A", "B")
TOPIC = "dualwrite"
MAX_KEYS = 10_000
MAX_UPDATES = 50_000


class KeyValueStore(Protocol):
    """What the race writes into: a database or a search index."""

    def put(self, key: str, value: str) -> None: ...

    def items(self) -> dict[str, str]: ...

    def close(self) -> None: ...


class SqliteTable:
    """The database: a table ``items(key PRIMARY KEY, value)`` in its own file."""

    def __init__(self, path: str):
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # the demo is about order, not fsync
        self.db.execute("CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY, value TEXT)")
        self.lock = threading.Lock()

    def put(self, key: str, value: str) -> None:
        with self.lock:
            self.db.execute(
                "INSERT INTO items VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def items(self) -> dict[str, str]:
        with self.lock:
            return dict(self.db.execute("SELECT key, value FROM items"))

    def close(self) -> None:
        self.db.close()


class SqliteSearchIndex:
    """The search index: an FTS5 table in its own file; a put replaces the key's document."""

    def __init__(self, path: str):
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # the demo is about order, not fsync
        self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(key UNINDEXED, body)")
        self.lock = threading.Lock()

    def put(self, key: str, value: str) -> None:
        with self.lock:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM docs WHERE key = ?", (key,))
            self.db.execute("INSERT INTO docs (key, body) VALUES (?, ?)", (key, value))
            self.db.execute("COMMIT")

    def search(self, words: str) -> list[str]:
        with self.lock:
            return [
                r[0] for r in self.db.execute("SELECT key FROM docs WHERE docs MATCH ?", (words,))
            ]

    def items(self) -> dict[str, str]:
        with self.lock:
            return dict(self.db.execute("SELECT key, body FROM docs"))

    def close(self) -> None:
        self.db.close()


# ------------------------------------------------------------------------- interleavings


class Interleaving(Protocol):
    def start(self, writers: tuple[str, ...], steps: int) -> None:
        """Before a mode runs: its writers and how many writes each makes per round."""

    def step(self, writer: str, round_no: int, step: int) -> contextlib.AbstractContextManager:
        """Held around the `step`-th write of `writer` in round `round_no`."""


class RandomPauses:
    """Real threads racing freely; a writer pauses up to `max_pause_ms` between its writes."""

    def __init__(self, max_pause_ms: float = 0.5, seed: int | None = None):
        self.max_pause_s = max_pause_ms / 1000
        self.rnd = random.Random(seed)

    def start(self, writers: tuple[str, ...], steps: int) -> None:
        pass

    @contextlib.contextmanager
    def step(self, writer: str, round_no: int, step: int) -> Iterator[None]:
        if step > 0:
            time.sleep(self.rnd.uniform(0, self.max_pause_s))
        yield


class ForcedInterleaving:
    """Every round: each writer's first write in writer order, then their second writes in
    reverse order (A1 B1 B2 A2) — the first writer's second write comes last. Real threads,
    each waiting for its turn."""

    def __init__(self, timeout_s: float = 30.0):
        self.timeout_s = timeout_s
        self.cond = threading.Condition()
        self.turns: list[tuple[str, int]] = []
        self.turn = 0

    def start(self, writers: tuple[str, ...], steps: int) -> None:
        self.turns = [
            (w, s) for s in range(steps) for w in (writers if s % 2 == 0 else writers[::-1])
        ]
        self.turn = 0

    @contextlib.contextmanager
    def step(self, writer: str, round_no: int, step: int) -> Iterator[None]:
        mine = round_no * len(self.turns) + self.turns.index((writer, step))
        with self.cond:
            if not self.cond.wait_for(lambda: self.turn == mine, timeout=self.timeout_s):
                raise TimeoutError(f"writer {writer} waited {self.timeout_s} s for its turn")
        try:
            yield
        finally:
            with self.cond:
                self.turn += 1
                self.cond.notify_all()


# ------------------------------------------------------------------------- the race


@dataclass
class ModeResult:
    """One mode's outcome: how many keys differ between the database and the index."""

    mode: str
    keys: int
    writes: int  # writes the writers made (direct: 2 per update; log: 1 per update)
    divergent_keys: int
    elapsed_ms: float
    examples: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    @property
    def divergent_share(self) -> float:
        """Divergent keys / keys (0.25: a quarter)."""
        return self.divergent_keys / self.keys if self.keys else 0.0

    @property
    def writes_per_s(self) -> float:
        return self.writes / (self.elapsed_ms / 1000) if self.elapsed_ms else 0.0


@dataclass
class Progress:
    mode: str = ""
    updates_done: int = 0
    updates_total: int = 0
    applied_db: int = 0
    applied_index: int = 0


class DualWriteRace:
    """Runs both modes in `directory` (its stores are created there)."""

    def __init__(
        self,
        directory: str,
        *,
        keys: int = 100,
        updates: int = 1_000,
        interleaving: Interleaving | None = None,
        seed: int = 0,
    ):
        if not 1 <= keys <= MAX_KEYS:
            raise InvalidConfig("keys", keys, f"must be between 1 and {MAX_KEYS}")
        if not 1 <= updates <= MAX_UPDATES:
            raise InvalidConfig("updates", updates, f"must be between 1 and {MAX_UPDATES}")
        self.directory, self.keys, self.updates = directory, keys, updates
        self.interleaving = interleaving or RandomPauses(seed=seed)
        rnd = random.Random(seed)
        self.key_of_round = [f"k{rnd.randrange(keys):05d}" for _ in range(updates)]
        self._progress = Progress()
        self._lock = threading.Lock()

    def progress(self) -> Progress:
        with self._lock:
            return Progress(**vars(self._progress))

    def _advance(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self._progress, name, getattr(self._progress, name) + n)

    def _stores(self, mode: str) -> tuple[SqliteTable, SqliteSearchIndex]:
        os.makedirs(os.path.join(self.directory, mode), exist_ok=True)
        db = SqliteTable(os.path.join(self.directory, mode, "database.sqlite3"))
        index = SqliteSearchIndex(os.path.join(self.directory, mode, "index.sqlite3"))
        return db, index

    def _begin(self, mode: str) -> None:
        with self._lock:
            self._progress = Progress(mode, 0, self.updates * len(WRITERS))

    def _writers(self, write: Callable[[str, int, str, str], None]) -> None:
        """Run the writers as threads; `write(writer, round, key, value)` does one update."""
        errors: list[BaseException] = []
        together = threading.Barrier(len(WRITERS))

        def run(writer: str) -> None:
            try:
                for i, key in enumerate(self.key_of_round):
                    together.wait()  # both get this round's update of `key` at the same moment
                    write(writer, i, key, f"{writer}{i}")
                    self._advance(updates_done=1)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)
                together.abort()

        threads = [threading.Thread(target=run, args=(w,), name=f"writer-{w}") for w in WRITERS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def run_direct(self) -> ModeResult:
        """Each writer writes the database, then the index: two separate writes."""
        self._begin("direct")
        db, index = self._stores("direct")
        gate = self.interleaving
        gate.start(WRITERS, 2)

        def write(writer: str, i: int, key: str, value: str) -> None:
            with gate.step(writer, i, 0):
                db.put(key, value)
                self._advance(applied_db=1)
            with gate.step(writer, i, 1):
                index.put(key, value)
                self._advance(applied_index=1)

        began = time.perf_counter()
        try:
            self._writers(write)
            return self._compare("direct", db, index, 2, began)
        finally:
            db.close()
            index.close()

    def run_log(self) -> ModeResult:
        """Each writer appends to the log; two consumers apply it in order to each store."""
        self._begin("log")
        db, index = self._stores("log")
        log = LogStore.open(os.path.join(self.directory, "log", "data"), background=False)
        gate = self.interleaving
        gate.start(WRITERS, 1)
        writing = threading.Event()
        writing.set()
        errors: list[BaseException] = []

        def write(writer: str, i: int, key: str, value: str) -> None:
            with gate.step(writer, i, 0):
                log.append(TOPIC, value.encode(), key.encode(), partition=0)

        def consume(target: KeyValueStore, counter: str) -> None:
            pos = 0
            try:
                while True:
                    still_writing = writing.is_set()
                    end = log.offsets(TOPIC, 0)[1]
                    if pos >= end:
                        if not still_writing:
                            return
                        time.sleep(0.001)
                        continue
                    for r in log.read(TOPIC, 0, pos, max_records=500):
                        target.put(r.key.decode(), r.value.decode())
                        pos = r.offset + 1
                        self._advance(**{counter: 1})
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        began = time.perf_counter()
        try:
            log.create_topic(TOPIC, 1, None)
            consumers = [
                threading.Thread(target=consume, args=(db, "applied_db"), name="apply-db"),
                threading.Thread(target=consume, args=(index, "applied_index"), name="apply-index"),
            ]
            for t in consumers:
                t.start()
            try:
                self._writers(write)
            finally:
                writing.clear()
                for t in consumers:
                    t.join()
            if errors:
                raise errors[0]
            return self._compare("log", db, index, 1, began)
        finally:
            db.close()
            index.close()
            log.close()

    def run_cdc(self, dsn: str, bootstrap: str, *, timeout_s: float = 120.0) -> ModeResult:
        """Each writer upserts into a PostgreSQL table (one write); CDC carries the changes into
        the log through the broker at `bootstrap`, a consumer applies them to the index. The
        run's table, publication, replication slot and topic are removed afterwards."""
        import psycopg2

        from streams.capture.postgres import PostgresCapture

        self._begin("cdc")
        name = f"tidelog_dualwrite_{uuid.uuid4().hex[:10]}"
        server = name.replace("_", "-")
        topic = f"{server}.public.{name}"
        index = self._stores("cdc")[1]
        admin = psycopg2.connect(dsn)
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f"CREATE TABLE {name} (key text PRIMARY KEY, value text NOT NULL)")
        capture = PostgresCapture(
            dsn=dsn, tables=[name], bootstrap=bootstrap, slot=name, publication=name, server=server
        )
        failure: list[BaseException] = []

        def capturing() -> None:
            try:
                capture.run()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                failure.append(exc)
                capture.ready.set()

        thread = threading.Thread(target=capturing, name="dualwrite-capture", daemon=True)
        thread.start()
        connections: dict[str, object] = {}
        gate = self.interleaving
        gate.start(WRITERS, 1)

        def write(writer: str, i: int, key: str, value: str) -> None:
            conn = connections.get(writer)
            if conn is None:
                conn = connections[writer] = psycopg2.connect(dsn)
                conn.autocommit = True
            with gate.step(writer, i, 0), conn.cursor() as cur:
                cur.execute(
                    f"INSERT INTO {name} VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )
            self._advance(applied_db=1)

        began = time.perf_counter()
        try:
            if not capture.ready.wait(timeout_s) or failure:
                raise failure[0] if failure else TimeoutError("the capture did not start")
            self._writers(write)
            self._follow(bootstrap, topic, index, self.updates * len(WRITERS), timeout_s, failure)
            with admin.cursor() as cur:
                cur.execute(f"SELECT key, value FROM {name}")
                in_db = dict(cur.fetchall())
            return self._compare("cdc", _Snapshot(in_db), index, 1, began)
        finally:
            for conn in connections.values():
                conn.close()  # type: ignore[attr-defined]
            capture.stop()
            thread.join(timeout_s)
            index.close()
            with admin.cursor() as cur:
                _drop_replication_slot(cur, name, timeout_s)
                cur.execute(f"DROP PUBLICATION IF EXISTS {name}")
                cur.execute(f"DROP TABLE IF EXISTS {name}")
            admin.close()
            _delete_topic(bootstrap, topic)

    def _follow(self, bootstrap, topic, index, changes, timeout_s, failure) -> None:
        """Apply the topic's change events to `index` until `changes` have been applied."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                **FETCH_DEFAULTS,
                "bootstrap.servers": bootstrap,
                "group.id": topic,
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            applied, deadline = 0, time.monotonic() + timeout_s
            while applied < changes:
                if failure:
                    raise failure[0]
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{applied} of {changes} changes reached the index")
                for m in consumer.consume(1000, timeout=0.2):
                    if m.error() is not None:
                        raise RuntimeError(f"reading {topic}: {m.error()}")
                    if m.value() is None:
                        continue  # a tombstone (no deletes here)
                    after = json.loads(m.value())["payload"]["after"]
                    index.put(after["key"], after["value"])
                    applied += 1
                    self._advance(applied_index=1)
        finally:
            consumer.close()

    def _compare(self, mode, db, index, writes_per_update, began) -> ModeResult:
        elapsed_ms = (time.perf_counter() - began) * 1000
        in_db, in_index = db.items(), index.items()
        differ = sorted(
            k for k in in_db.keys() | in_index.keys() if in_db.get(k) != in_index.get(k)
        )
        return ModeResult(
            mode,
            keys=len(in_db.keys() | in_index.keys()),
            writes=self.updates * len(WRITERS) * writes_per_update,
            divergent_keys=len(differ),
            elapsed_ms=elapsed_ms,
            examples=[(k, in_db.get(k), in_index.get(k)) for k in differ[:5]],
        )


class _Snapshot:
    """Rows read once (the PostgreSQL table at the end of a run), as a ``KeyValueStore``."""

    def __init__(self, rows: dict[str, str]):
        self.rows = rows

    def put(self, key: str, value: str) -> None:
        raise TypeError("a snapshot is read-only")

    def items(self) -> dict[str, str]:
        return dict(self.rows)

    def close(self) -> None:
        pass


def _drop_replication_slot(cur, slot: str, timeout_s: float) -> None:
    """Drop replication slot `slot` if it exists, once no walsender holds it. The capture has
    closed its replication connection, but PostgreSQL's backend for it may still be exiting:
    dropping it then fails with ObjectInUse (seen on a loaded machine). Still held after
    `timeout_s`, the drop is tried anyway and that error raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        row = cur.fetchone()
        if row is None:
            return
        if not row[0] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


def _delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    try:
        for future in AdminClient({"bootstrap.servers": bootstrap}).delete_topics([topic]).values():
            future.result(30)
    except Exception:  # noqa: BLE001 - best effort: the run's outcome does not depend on it
        pass
