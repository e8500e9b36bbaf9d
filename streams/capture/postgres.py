"""Change data capture from PostgreSQL: logical decoding (``pgoutput``) into compacted topics.

`PostgresCapture` checks the chosen tables (each needs a primary key and a replica identity
that carries it), creates a publication for them and a logical replication slot, then streams
every committed insert, update and delete, in commit order, as Debezium change events into one
compacted topic per table (``<server>.<schema>.<table>``, one partition, keyed by primary key).
A delete is followed by a tombstone (same key, null value) so compaction forgets the row; an
update that changes the primary key is a delete (+ tombstone) of the old key and a create of
the new one, as Debezium does.

The driver is psycopg2 (``psycopg2-binary``): psycopg 3 has no API for the streaming
replication protocol (it refuses ``COPY_BOTH``), psycopg2 has ``LogicalReplicationConnection``
with ``start_replication(decode=False)`` for pgoutput's binary messages and ``send_feedback``.

Delivery guarantee. Records go out through an idempotent producer (confluent-kafka,
``enable.idempotence=true``, ``acks=all``), so retries inside one producer session neither
duplicate nor reorder; with ``enable.gapless.guarantee`` and no message timeout, a failure that
could leave a gap is fatal, so an acknowledged record means every earlier record of its
partition is in the log (only the last record of each transaction and topic carries a delivery
callback). The position confirmed to PostgreSQL (``send_feedback(flush_lsn=)``, the slot's
``confirmed_flush_lsn``) is a transaction's commit end LSN, sent only once every record of that
transaction and of all earlier ones has been acknowledged by the log (delivery reports); after a
crash PostgreSQL replays from there, so nothing is lost. The replayed transactions that
had already reached the log are not written twice: every record carries its position (the
transaction's commit LSN and the record's index in it) in the ``tidelog.capture.position``
header, and on start the capture reads the last record of each topic and skips records at or
before that position. Effectively-once into the log, then, with one window left: a produce
request already on the wire when the process died could be appended after the restarted capture
read the topic's end (a transactional producer would fence it; Tidelog's broker gains
transactions in another change).

Snapshots (`streams.capture.snapshot`) resume after a restart from their progress records in
the compacted ``<server>.__snapshots`` topic, each written once the log has acknowledged the
chunk it records.
"""

from __future__ import annotations

import json
import logging
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streams.capture import envelope, pgoutput, snapshot
from streams.capture.envelope import TableSchema
from streams.capture.snapshot import ChunkWindow, SnapshotJob
from streams.librdkafka import FETCH_DEFAULTS

log = logging.getLogger(__name__)

POSITION_HEADER = "tidelog.capture.position"
DEFAULT_SLOT = "tidelog_capture"
DEFAULT_PUBLICATION = "tidelog_capture"
DEFAULT_SERVER = "tidelog"
TIMEOUT_S = 30.0
DEFAULT_COMPRESSION = "lz4"
POLL_EVERY = 256  # messages handled between two serves of delivery reports inside a transaction


# what a chunk's progress record says as of its high watermark (the job may be further on when
# the record is written)
_CHUNK_COUNTERS = (
    "last_key",
    "chunks",
    "rows_selected",
    "rows_written",
    "rows_dropped",
    "done",
    "as_of_lsn",
    "as_of_offset",
)


_CHANGES = frozenset((pgoutput.Insert, pgoutput.Update, pgoutput.Delete))


class CaptureError(Exception):
    """A setup problem the user must fix (a table without a primary key, a bad topic...)."""


@dataclass(frozen=True)
class TableInfo:
    oid: int
    schema: str
    name: str
    key_columns: tuple[str, ...]

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.name}"


def split_table_name(name: str) -> tuple[str, str]:
    schema, dot, table = name.strip().rpartition(".")
    if not table:
        raise CaptureError(f"not a table name: {name!r} (expected TABLE or SCHEMA.TABLE)")
    return (schema if dot else "public"), table


_IDENTITY_REFUSALS = {
    "n": "REPLICA IDENTITY NOTHING: updates and deletes would not carry the row's key; "
    "set REPLICA IDENTITY DEFAULT (or FULL) on it",
    "i": "REPLICA IDENTITY USING INDEX: deletes would carry that index's columns, not the "
    "primary key the topic is keyed by; set REPLICA IDENTITY DEFAULT (or FULL) on it",
}


def check_tables(conn: Any, names: Sequence[str]) -> list[TableInfo]:
    """The tables to capture, each checked: it exists, is an ordinary table, has a primary key
    and a replica identity that carries it. Raises `CaptureError` naming every refusal."""
    tables, problems = [], []
    with conn.cursor() as cur:
        for name in names:
            schema, table = split_table_name(name)
            cur.execute(
                "SELECT c.oid, c.relkind, c.relreplident FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relname = %s",
                (schema, table),
            )
            row = cur.fetchone()
            if row is None:
                problems.append(f"table {schema}.{table} does not exist")
                continue
            oid, relkind, identity = row
            if relkind not in ("r", "p"):
                problems.append(f"{schema}.{table} is not a table (relkind {relkind!r})")
                continue
            cur.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indrelid = %s AND i.indisprimary "
                "ORDER BY array_position(i.indkey::int2[], a.attnum)",
                (oid,),
            )
            keys = tuple(r[0] for r in cur.fetchall())
            if not keys:
                problems.append(
                    f"table {schema}.{table} has no primary key: its topic is keyed by primary "
                    "key so that compaction keeps one record per row, and without one updates "
                    "and deletes cannot name the row they change; add one "
                    f"(ALTER TABLE {schema}.{table} ADD PRIMARY KEY (...))"
                )
            elif identity in _IDENTITY_REFUSALS:
                problems.append(f"table {schema}.{table} has {_IDENTITY_REFUSALS[identity]}")
            else:
                tables.append(TableInfo(oid, schema, table, keys))
    conn.rollback()
    if problems:
        raise CaptureError("cannot capture: " + "; ".join(problems))
    return tables


def _quoted_tables(tables: Sequence[TableInfo]) -> Any:
    from psycopg2 import sql

    return sql.SQL(", ").join(sql.Identifier(t.schema, t.name) for t in tables)


def ensure_publication(conn: Any, name: str, tables: Sequence[TableInfo]) -> None:
    """A publication of exactly these tables (created, or its table list set)."""
    from psycopg2 import sql

    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        verb = (
            "ALTER PUBLICATION {} SET TABLE {}"
            if cur.fetchone()
            else "CREATE PUBLICATION {} FOR TABLE {}"
        )
        cur.execute(sql.SQL(verb).format(sql.Identifier(name), _quoted_tables(tables)))
    conn.commit()


def ensure_slot(conn: Any, name: str) -> None:
    """A logical replication slot with the pgoutput plugin in this database."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT plugin, database, slot_type FROM pg_replication_slots WHERE slot_name = %s",
            (name,),
        )
        row = cur.fetchone()
        database = conn.info.dbname
        if row is None:
            cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
            log.info("created replication slot %s (pgoutput) in %s", name, database)
        elif (row[2], row[0], row[1]) != ("logical", "pgoutput", database):
            raise CaptureError(
                f"replication slot {name!r} exists but is a {row[2]} slot of plugin {row[0]!r} "
                f"in database {row[1]!r}; capture needs a logical pgoutput slot in {database!r}: "
                "choose another --slot"
            )
    conn.commit()


def parse_position(raw: bytes | None) -> tuple[int, int] | None:
    if not raw:
        return None
    lsn, _, index = raw.decode().partition(":")
    return int(lsn), int(index)


class KafkaSink:
    """The topics and the idempotent producer (confluent-kafka) on a Kafka-protocol cluster.
    `client_config`: the cluster's connection settings (SASL, TLS: streams.cluster.connection),
    for every client it makes; `extra_config`: more settings for the producer only."""

    def __init__(
        self,
        bootstrap: str,
        extra_config: dict[str, Any] | None = None,
        *,
        client_config: dict[str, Any] | None = None,
    ) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.base = {**(client_config or {}), "bootstrap.servers": bootstrap}
        self.admin = AdminClient(self.base)
        self.producer = Producer(
            {
                **self.base,
                "enable.idempotence": True,
                # a failure that could leave a gap in a partition's records is fatal, and
                # records never time out (retried until the log takes them, as Kafka Connect's
                # source producers with delivery.timeout.ms=MAX): so an acknowledged record
                # means every earlier one of its partition is in the log (see `_send_held`)
                "enable.gapless.guarantee": True,
                "message.timeout.ms": 0,
                "acks": "all",
                "linger.ms": 5,
                # the Debezium envelopes (~2 KB, each with the table's schema) shrink about
                # tenfold: less to send, store and serve (the broker still decodes a compacted
                # topic's batches to check their keys); in tests/bench/bench_capture.py it cut
                # the broker's CPU per row and raised the rows/s
                "compression.type": DEFAULT_COMPRESSION,
                "client.id": "tidelog-capture",
                **(extra_config or {}),
            }
        )

    def ensure_topic(self, topic: str) -> None:
        """A compacted one-partition topic (created, or an existing one checked)."""
        from confluent_kafka.admin import ConfigResource, NewTopic

        metadata = self.admin.list_topics(timeout=TIMEOUT_S)
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            futures = self.admin.create_topics(
                [NewTopic(topic, 1, config={"cleanup.policy": "compact"})],
                request_timeout=TIMEOUT_S,
            )
            try:
                futures[topic].result(TIMEOUT_S)
                log.info("created topic %s (cleanup.policy=compact, 1 partition)", topic)
                return
            except Exception as exc:  # created meanwhile: checked below
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise CaptureError(f"cannot create topic {topic!r}: {exc}") from exc
            metadata = self.admin.list_topics(topic, timeout=TIMEOUT_S)
        partitions = len(metadata.topics[topic].partitions)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        config = self.admin.describe_configs([resource])[resource].result(TIMEOUT_S)
        policy = config["cleanup.policy"].value if "cleanup.policy" in config else "delete"
        if partitions != 1 or "compact" not in policy:
            raise CaptureError(
                f"topic {topic!r} exists with {partitions} partition(s) and "
                f"cleanup.policy={policy}; capture writes a table's changes in commit order to "
                "one compacted partition: delete the topic or choose another --server name"
            )

    def last_position(self, topic: str) -> tuple[int, int] | None:
        """The capture position of the topic's last record (None: empty or not ours)."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            {
                **self.base,
                "group.id": "tidelog-capture-position",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, 0), timeout=TIMEOUT_S, cached=False
            )
            if high <= low:
                return None
            consumer.assign([TopicPartition(topic, 0, high - 1)])
            deadline = time.monotonic() + TIMEOUT_S
            last = None
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        break
                    raise CaptureError(f"cannot read the end of {topic!r}: {err}")
                last = msg
                if (msg.offset() or 0) >= high - 1:
                    break
            if last is None:
                raise CaptureError(f"cannot read the last record of {topic!r} (offset {high - 1})")
            headers = dict(last.headers() or [])
            raw = headers.get(POSITION_HEADER)
            return parse_position(raw.encode() if isinstance(raw, str) else raw)
        finally:
            consumer.close()

    def read_compacted(self, topic: str) -> dict[bytes, bytes]:
        """A compacted topic's state: the last value of each key (tombstones delete)."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            {
                **FETCH_DEFAULTS,  # it reads the whole topic
                **self.base,
                "group.id": "tidelog-capture-snapshots",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        state: dict[bytes, bytes] = {}
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, 0), timeout=TIMEOUT_S, cached=False
            )
            if high <= low:
                return state
            consumer.assign([TopicPartition(topic, 0, low)])
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                if time.monotonic() > deadline:
                    raise CaptureError(f"cannot read {topic!r} to its end (offset {high})")
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        break
                    raise CaptureError(f"cannot read {topic!r}: {err}")
                key, value = msg.key(), msg.value()
                if key is not None:  # the capture keys every record it writes
                    if value is None:
                        state.pop(key, None)
                    else:
                        state[key] = value
                if (msg.offset() or 0) >= high - 1:
                    break
            return state
        finally:
            consumer.close()


@dataclass
class _Transaction:
    begin: pgoutput.Begin
    end_lsn: int = 0
    committed: bool = False
    outstanding: int = 0
    records: int = 0
    last_offset: int | None = None  # the greatest log offset acknowledged of its records
    on_delivery: Callable[[Any, Any], None] | None = None  # its records' delivery callback
    # snapshot chunks whose high watermark this transaction is: their progress is recorded
    # once the transaction's records are all acknowledged
    chunks: list[tuple[SnapshotJob, dict[str, Any]]] = field(default_factory=list)


@dataclass
class CaptureStats:
    transactions: int = 0
    records: int = 0
    skipped_records: int = 0  # replayed after a restart, already in the log
    truncates: int = 0
    confirmed_lsn: int = 0
    schema_changes: list[str] = field(default_factory=list)


class PostgresCapture:
    def __init__(
        self,
        *,
        dsn: str,
        tables: Sequence[str],
        bootstrap: str,
        slot: str = DEFAULT_SLOT,
        publication: str = DEFAULT_PUBLICATION,
        server: str = DEFAULT_SERVER,
        producer_config: dict[str, Any] | None = None,
        client_config: dict[str, Any] | None = None,
        status_interval_s: float = 1.0,
        snapshot_tables: Sequence[str] = (),
        chunk_rows: int = snapshot.DEFAULT_CHUNK_ROWS,
    ) -> None:
        self.dsn = dsn
        self.table_names = list(tables)
        self.bootstrap = bootstrap
        self.slot = slot
        self.publication = publication
        self.server = server
        self.producer_config = producer_config
        self.client_config = client_config  # the cluster's connection settings (SASL, TLS)
        self.status_interval_s = status_interval_s
        self.stats = CaptureStats()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self.sink: KafkaSink | None = None
        self._tables: dict[int, TableInfo] = {}
        self._schemas: dict[int, TableSchema] = {}
        self._last_positions: dict[str, tuple[int, int]] = {}
        self._pending: deque[_Transaction] = deque()
        # per topic, the last record of the current transaction, not sent yet (see `_emit`)
        self._held: dict[str, tuple[bytes | None, bytes, list[Any]]] = {}
        self._current: _Transaction | None = None
        self._confirmed = 0
        self._sent_confirmed = 0
        self.ready = threading.Event()
        self.chunk_rows = chunk_rows
        self.snapshots: list[SnapshotJob] = []  # every snapshot asked for, with its progress
        self._jobs: deque[SnapshotJob] = deque()  # those not done, in order
        self._unrecorded: deque[SnapshotJob] = deque()  # asked for, no progress record yet
        self._window: ChunkWindow | None = None
        self._paused = threading.Event()
        self._lock = threading.Lock()
        self._initial_snapshots = list(snapshot_tables)

    def stop(self) -> None:
        self._stop.set()

    # -- snapshots (thread-safe: the console or a signal handler may call these) -----------

    def request_snapshot(
        self, table: str, *, keys: Sequence[dict[str, Any]] | None = None
    ) -> SnapshotJob:
        """Queues a DBLog snapshot of a captured table (or of the rows with these keys)."""
        schema_name, name = split_table_name(table)
        info = next(
            (t for t in self._tables.values() if (t.schema, t.name) == (schema_name, name)), None
        )
        if info is None:
            raise CaptureError(f"table {schema_name}.{name} is not captured by this source")
        if keys is not None:
            for key in keys:
                if set(key) != set(info.key_columns):
                    raise CaptureError(
                        f"a key of {info.qualified_name} names {sorted(info.key_columns)}, "
                        f"not {sorted(key)}"
                    )
        job = SnapshotJob(
            info.oid, info.qualified_name, list(keys) if keys is not None else None, self.chunk_rows
        )
        with self._lock:
            self.snapshots.append(job)
            self._jobs.append(job)
            self._unrecorded.append(job)
        return job

    def pause_snapshots(self) -> None:
        """No new chunk starts until `resume_snapshots` (the stream goes on)."""
        self._paused.set()

    def resume_snapshots(self) -> None:
        self._paused.clear()

    @property
    def snapshots_paused(self) -> bool:
        return self._paused.is_set()

    def topic_for(self, table: TableInfo) -> str:
        return f"{self.server}.{table.schema}.{table.name}"

    @property
    def progress_topic(self) -> str:
        """The compacted topic of the snapshots' progress, read back to resume them."""
        return f"{self.server}.__snapshots"

    def _restore_snapshots(self, sink: KafkaSink) -> None:
        """The snapshots recorded in the progress topic; unfinished ones queued to go on from
        their last recorded key."""
        by_name = {t.qualified_name: t for t in self._tables.values()}
        restored = []
        for value in sink.read_compacted(self.progress_topic).values():
            doc = json.loads(value)
            info = by_name.get(doc["table"])
            if info is None:
                if not doc["done"]:
                    log.warning(
                        "snapshot %s of %s not resumed: the table is not captured now",
                        doc["id"],
                        doc["table"],
                    )
                continue
            restored.append(snapshot.job_from_progress(info.oid, doc))
        restored.sort(key=lambda j: j.requested_ms)
        with self._lock:
            for job in restored:
                self.snapshots.append(job)
                if not job.done:
                    self._jobs.append(job)
                    log.info(
                        "resuming snapshot of %s after key %s: %d chunks, %d rows written "
                        "before the restart",
                        job.table,
                        job.last_key,
                        job.chunks,
                        job.rows_written,
                    )

    def setup(self) -> tuple[Any, KafkaSink]:
        """Checks the tables, creates the publication, slot and topics; reads the positions."""
        import psycopg2

        conn = psycopg2.connect(self.dsn)
        try:
            tables = check_tables(conn, self.table_names)
            ensure_publication(conn, self.publication, tables)
            ensure_slot(conn, self.slot)
            self.database = conn.info.dbname
        except Exception:
            conn.close()
            raise
        self._tables = {t.oid: t for t in tables}
        sink = KafkaSink(
            self.bootstrap,
            {"error_cb": self._producer_error, **(self.producer_config or {})},
            client_config=self.client_config,
        )
        for table in tables:
            topic = self.topic_for(table)
            sink.ensure_topic(topic)
            position = sink.last_position(topic)
            if position is not None:
                self._last_positions[topic] = position
        sink.ensure_topic(self.progress_topic)
        self._restore_snapshots(sink)
        return conn, sink

    def run(self) -> CaptureStats:
        """Streams until `stop()`; then flushes, confirms what the log holds and returns."""
        import psycopg2
        from confluent_kafka import KafkaException
        from psycopg2.extras import LogicalReplicationConnection

        conn, sink = self.setup()
        conn.autocommit = True  # watermarks and snapshot chunks, each committed on its own
        self._db = conn
        self.sink = sink
        resuming = {job.table for job in self._jobs if job.keys is None}
        for table in self._initial_snapshots:
            schema_name, name = split_table_name(table)
            if f"{schema_name}.{name}" not in resuming:  # else that one goes on
                self.request_snapshot(table)
        repl = psycopg2.connect(self.dsn, connection_factory=LogicalReplicationConnection)
        cursor = repl.cursor()
        try:
            cursor.start_replication(
                slot_name=self.slot,
                decode=False,
                options={
                    "proto_version": "1",
                    "publication_names": self.publication,
                    "messages": "true",  # the snapshots' watermarks
                },
                status_interval=self.status_interval_s,
            )
            self.ready.set()
            log.info(
                "capturing %s from slot %s into %s",
                ", ".join(t.qualified_name for t in self._tables.values()),
                self.slot,
                self.bootstrap,
            )
            decode, handle, poll = pgoutput.decode, self._handle, sink.producer.poll
            unpolled = 0  # messages handled since the last delivery reports were served
            while not self._stop.is_set():
                msg = cursor.read_message()
                if self._unrecorded:
                    self._record_requested()
                if self._window is None and self._jobs and not self._paused.is_set():
                    self._start_chunk()
                if msg is None:
                    poll(0)
                    self._advance(cursor)
                    select.select([cursor], [], [], 0.05)
                    continue
                handle(decode(msg.payload), msg.data_start)
                unpolled += 1
                # delivery reports and confirmation at each transaction's end, and every
                # POLL_EVERY messages inside a large one (not after every message: the
                # per-message calls were a tenth of the capture's time)
                if self._current is None or unpolled >= POLL_EVERY:
                    poll(0)
                    self._advance(cursor)
                    unpolled = 0
            remaining = sink.producer.flush(TIMEOUT_S)
            self._advance(cursor, force=True)
            remaining = sink.producer.flush(TIMEOUT_S)  # and the chunks' progress records
            if remaining:
                log.warning("%d records not acknowledged at stop; they will be resent", remaining)
        except KafkaException as exc:  # a fatal producer error, raised by poll() or flush()
            raise CaptureError(f"the log refused a record: {exc}") from exc
        finally:
            repl.close()
            conn.close()
            self.sink = None  # the producer's and admin client's threads and sockets go with it
        return self.stats

    # -- confirmation ------------------------------------------------------------------------

    def _advance(self, cursor: Any, *, force: bool = False) -> None:
        """Confirms the end LSN of the transactions the log fully acknowledged, in order
        (psycopg2 sends it with the next status update, or now when `force`)."""
        if self._failure is not None:
            raise CaptureError(f"the log refused a record: {self._failure}")
        while self._pending and self._pending[0].committed and self._pending[0].outstanding == 0:
            txn = self._pending.popleft()
            self._confirmed = txn.end_lsn
            for job, counters in txn.chunks:
                if txn.last_offset is not None:
                    counters["as_of_offset"] = txn.last_offset
                self._record_progress(job, **counters)
        if self._confirmed > self._sent_confirmed or force:
            cursor.send_feedback(flush_lsn=self._confirmed, write_lsn=self._confirmed, force=force)
            self._sent_confirmed = self._confirmed
            self.stats.confirmed_lsn = self._confirmed

    # -- messages ----------------------------------------------------------------------------

    def _handle(self, msg: pgoutput.PgOutputMessage, lsn: int) -> None:
        if type(msg) in _CHANGES:  # most messages: no isinstance chain for them
            self._change(msg, lsn)  # type: ignore[arg-type]
        elif isinstance(msg, pgoutput.Begin):
            self._current = _Transaction(msg)
            self._pending.append(self._current)
        elif isinstance(msg, pgoutput.Commit):
            txn = self._require_txn(msg)
            self._send_held(txn)
            txn.end_lsn, txn.committed = msg.end_lsn, True
            self._current = None
            self.stats.transactions += 1
        elif isinstance(msg, pgoutput.Relation):
            self._relation(msg)
        elif isinstance(msg, pgoutput.Message):
            self._watermark(msg, lsn)
        elif isinstance(msg, pgoutput.Truncate):
            self.stats.truncates += 1
            names = [self._tables[r].qualified_name for r in msg.relation_ids if r in self._tables]
            log.warning(
                "TRUNCATE of %s is not carried into the topics (no per-row events, like "
                "Debezium's default skipped.operations=t); their compacted state keeps the "
                "rows until they are deleted or re-snapshotted",
                ", ".join(names),
            )

    def _require_txn(self, msg: object) -> _Transaction:
        if self._current is None:
            raise pgoutput.PgOutputError(f"{type(msg).__name__} outside a transaction")
        return self._current

    def _relation(self, rel: pgoutput.Relation) -> None:
        table = self._tables.get(rel.relation_id)
        if table is None:
            return
        previous = self._schemas.get(rel.relation_id)
        columns = {c.name for c in rel.columns}
        missing = [k for k in table.key_columns if k not in columns]
        if missing:
            raise CaptureError(f"{table.qualified_name}: primary key column(s) {missing} gone")
        self._schemas[rel.relation_id] = TableSchema(
            relation=rel,
            key_columns=table.key_columns,
            topic=self.topic_for(table),
            server=self.server,
            database=self.database,
        )
        if previous is not None and previous.relation.columns != rel.columns:
            before = [c.name for c in previous.relation.columns]
            after = [c.name for c in rel.columns]
            change = f"{table.qualified_name}: columns {before} -> {after}"
            self.stats.schema_changes.append(change)
            log.info("schema change of %s", change)

    def _change(self, msg: pgoutput.Insert | pgoutput.Update | pgoutput.Delete, lsn: int) -> None:
        txn = self._require_txn(msg)
        schema = self._schemas.get(msg.relation_id)
        if schema is None:
            if msg.relation_id in self._tables:
                raise pgoutput.PgOutputError(
                    f"change of relation {msg.relation_id} before its Relation"
                )
            return
        ts_ms = int(time.time() * 1000)
        begin = txn.begin
        change_event = envelope.change_event

        def event(op: str, before: dict | None, after: dict | None) -> bytes:
            return change_event(
                schema, op=op, before=before, after=after, lsn=lsn, begin=begin, ts_ms=ts_ms
            )

        if isinstance(msg, pgoutput.Insert):  # the common case first, without the closure
            after = schema.row(msg.new)
            key = schema.key_of(after)
            if self._window is not None:
                self._supersede(msg.relation_id, key)
            value = change_event(
                schema, op="c", before=None, after=after, lsn=lsn, begin=begin, ts_ms=ts_ms
            )
            self._emit(txn, schema, key, value)
        elif isinstance(msg, pgoutput.Update):
            new = msg.new
            if msg.old_kind == "O":  # REPLICA IDENTITY FULL: large values the update kept
                new = tuple(
                    o if n is pgoutput.UNCHANGED_TOAST else n
                    for n, o in zip(msg.new, msg.old or (), strict=True)
                )
            after = schema.row(new)
            before = schema.row(msg.old) if msg.old is not None else None
            key = schema.key_of(after)
            self._supersede(msg.relation_id, key)
            if before is not None and schema.key_of(before) != key:
                old_key = schema.key_of(before)
                self._supersede(msg.relation_id, old_key)
                self._emit(txn, schema, old_key, event("d", before, None))
                self._emit(txn, schema, old_key, None)
                self._emit(txn, schema, key, event("c", None, after))
            else:
                self._emit(txn, schema, key, event("u", before, after))
        else:
            before = schema.row(msg.old)
            key = schema.key_of(before)
            self._supersede(msg.relation_id, key)
            self._emit(txn, schema, key, event("d", before, None))
            self._emit(txn, schema, key, None)  # the tombstone

    def _sink(self) -> KafkaSink:
        if self.sink is None:
            raise CaptureError("the capture is not running (no sink to write to)")
        return self.sink

    # -- DBLog chunks ------------------------------------------------------------------------

    def _record_progress(self, job: SnapshotJob, **counters: Any) -> None:
        """Writes the snapshot's progress record (not waited for: a lost one only means a chunk
        is read again after a restart)."""

        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                self._failure = err

        producer = self._sink().producer
        while True:
            try:
                producer.produce(
                    self.progress_topic,
                    key=snapshot.progress_key(job),
                    value=snapshot.progress_value(job, **counters),
                    partition=0,
                    on_delivery=done,
                )
                return
            except BufferError:
                producer.poll(0.1)

    def _record_requested(self) -> None:
        """The snapshots asked for since, recorded (so they survive a restart before or while
        they wait for their first chunk: queued behind another snapshot, or paused)."""
        with self._lock:
            jobs = list(self._unrecorded)
            self._unrecorded.clear()
        for job in jobs:
            if not job.recorded:
                self._record_progress(job)
                job.recorded = True

    def _start_chunk(self) -> None:
        with self._lock:
            job = self._jobs[0]
        if not job.recorded:  # asked for since this loop's `_record_requested`
            self._record_requested()
        info = self._tables[job.oid]
        schema = snapshot.table_schema(
            self._db,
            job.oid,
            info.key_columns,
            topic=self.topic_for(info),
            server=self.server,
            database=self.database,
        )
        self._window = snapshot.read_chunk(self._db, job, schema)

    def _supersede(self, relation_id: int, key: bytes) -> None:
        """A change inside a chunk's window: the stream has that row, newer; drop it."""
        window = self._window
        if window is not None and window.open and window.job.oid == relation_id:
            if window.rows.pop(key, None) is not None:
                window.job.rows_dropped += 1

    def _watermark(self, msg: pgoutput.Message, lsn: int) -> None:
        mark = snapshot.parse_watermark(msg)
        window = self._window
        if mark is None or window is None or mark[1] != window.id:
            return  # not ours, or a window of before a restart
        if mark[0] == "low":
            window.open = True
            return
        txn = self._require_txn(msg)
        ts_ms = int(time.time() * 1000)
        for key, row in window.rows.items():
            value = envelope.change_event(
                window.schema,
                op="r",
                before=None,
                after=row,
                lsn=lsn,
                begin=txn.begin,
                ts_ms=ts_ms,
                snapshot="incremental",
            )
            self._emit(txn, window.schema, key, value, snapshot=window.job)
        job = window.job
        job.chunks += 1
        job.rows_written += len(window.rows)
        job.as_of_lsn = txn.begin.final_lsn
        job.last_key = window.last_key if window.last_key is not None else job.last_key
        self._window = None
        if not window.full:
            job.done = True
        # this chunk's progress, recorded once its records are acknowledged (in `_advance`)
        recorded = json.loads(snapshot.progress_value(job))
        txn.chunks.append((job, {k: recorded[k] for k in _CHUNK_COUNTERS}))
        if job.done:
            with self._lock:
                self._jobs.popleft()
            log.info(
                "snapshot of %s done: %d rows in %d chunks (%d superseded by changes), as of %s",
                job.table,
                job.rows_written,
                job.chunks,
                job.rows_dropped,
                pgoutput.format_lsn(job.as_of_lsn),
            )

    def _emit(
        self,
        txn: _Transaction,
        schema: TableSchema,
        key: bytes,
        value: bytes | None,
        snapshot: SnapshotJob | None = None,
    ) -> None:
        """Sends one record of `txn`. A change is held back until the next record of its topic
        (then sent without a delivery callback) or its transaction's commit (then sent with the
        transaction's callback, see `_send_held`); a snapshot's record is sent with a callback of
        its own (its offset is the snapshot's position)."""
        index = txn.records
        txn.records += 1
        topic = schema.topic
        last = self._last_positions.get(topic)
        if last is not None and (txn.begin.final_lsn, index) <= last:
            self.stats.skipped_records += 1
            return
        headers: list[tuple[str, str | bytes | None]] = [
            (POSITION_HEADER, b"%d:%d" % (txn.begin.final_lsn, index))
        ]
        held = self._held.pop(topic, None)
        if held is not None:  # not its transaction's last record in this topic
            self._produce(topic, *held, None)
        if snapshot is None:
            self._held[topic] = (value, key, headers)
        else:
            txn.outstanding += 1
            self._produce(topic, value, key, headers, self._delivery_callback(txn, snapshot))
        self.stats.records += 1

    def _send_held(self, txn: _Transaction) -> None:
        """At `txn`'s commit: its last record in each topic, sent with its delivery callback.
        The producer is idempotent with ``enable.gapless.guarantee`` and no message timeout, so
        that record's acknowledgement means every earlier record of the partition is in the log
        too (a failure that could leave a gap is fatal and fails every later record, this one
        included): one callback per transaction and topic instead of one per record."""
        if not self._held:
            return
        if txn.on_delivery is None:
            txn.on_delivery = self._delivery_callback(txn)
        for topic, (value, key, headers) in self._held.items():
            txn.outstanding += 1
            self._produce(topic, value, key, headers, txn.on_delivery)
        self._held.clear()

    def _produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes,
        headers: list[tuple[str, str | bytes | None]],
        on_delivery: Callable[[Any, Any], None] | None,
    ) -> None:
        producer = self._sink().producer
        while True:
            try:
                # positional, about twice as fast as keywords in confluent-kafka 2.16 (pinned):
                # topic, value, key, partition, callback, on_delivery (its alias), timestamp
                # (0: now), headers
                producer.produce(topic, value, key, 0, on_delivery, None, 0, headers)
                return
            except BufferError:  # the local queue is full: wait for deliveries
                producer.poll(0.1)

    def _producer_error(self, err: Any) -> None:
        """The producer's errors: a fatal one (the gapless guarantee's among them) stops the
        capture; the others (a broker connection lost...) are retried by librdkafka."""
        if err.fatal():
            self._failure = err
        else:
            log.info("producer: %s", err)

    def _delivery_callback(
        self, txn: _Transaction, snapshot: SnapshotJob | None = None
    ) -> Callable[[Any, Any], None]:
        def done(err: Any, msg: Any) -> None:
            if err is not None:
                self._failure = err
            else:
                txn.outstanding -= 1
                offset = msg.offset() if msg is not None else None
                if offset is not None and offset >= 0:
                    txn.last_offset = max(txn.last_offset or 0, offset)
                    if snapshot is not None:
                        snapshot.as_of_offset = max(snapshot.as_of_offset or 0, offset)

        return done

    def lag_seconds(self, now_us: int | None = None) -> float:
        """Seconds since the commit of the oldest transaction received but not yet confirmed
        (0.0: everything received is in the log). Changes PostgreSQL has not sent yet are not
        counted here: the slot's lag in bytes shows those."""
        pending = self._pending
        try:
            oldest = pending[0]
        except IndexError:
            return 0.0
        now = now_us if now_us is not None else int(time.time() * 1_000_000)
        return max(0.0, (now - oldest.begin.commit_ts_us) / 1_000_000)
