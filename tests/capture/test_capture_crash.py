"""The capture position: PostgreSQL is told a transaction is consumed only once the log holds
it, so a kill -9 of the capture loses nothing, and replayed transactions are not written twice.
"""

from __future__ import annotations

import collections
import signal
import subprocess
import threading
import time

import psycopg2
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from streams.capture.postgres import CaptureError, PostgresCapture
from tests.capture.helpers import (
    DEADLINE_S,
    CaptureThread,
    Writer,
    capture_command,
    events,
    execute,
    fold,
    read_topic,
    slot_for,
    table_rows,
    wait_for,
)
from tests.kafka_servers import REPO_ROOT, TidelogListener, free_port

TOPIC = "tidelog.public.accounts"


def _confirmed_lsn(dsn: str) -> str | None:
    conn = psycopg2.connect(dsn)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = %s",
            (slot_for(dsn),),
        )
        row = cur.fetchone()
    conn.close()
    return row and row[0]


def _start(dsn: str, bootstrap: str, log) -> subprocess.Popen:
    cmd = capture_command(dsn, "accounts", bootstrap, "--slot", slot_for(dsn))
    return subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=log)


def test_kill_9_mid_stream_loses_nothing_and_duplicates_nothing(pg_dsn, bootstrap, tmp_path):
    execute(
        pg_dsn,
        "CREATE TABLE accounts (id int PRIMARY KEY, version int NOT NULL, note text)",
        "ALTER TABLE accounts REPLICA IDENTITY FULL",  # deletes carry the version too
    )
    log_path = tmp_path / "capture.log"
    stop = threading.Event()
    writers = [Writer(pg_dsn, n, stop) for n in range(3)]
    with open(log_path, "ab") as log:
        first = _start(pg_dsn, bootstrap, log)
        try:
            wait_for(lambda: _confirmed_lsn(pg_dsn), "the replication slot")
            for w in writers:
                w.start()
            wait_for(lambda: len(read_topic(bootstrap, TOPIC)) >= 200, "200 records")
            first.send_signal(signal.SIGKILL)
            assert first.wait(DEADLINE_S) == -signal.SIGKILL
            killed_at = len(read_topic(bootstrap, TOPIC))
            time.sleep(1)  # the writers go on while the capture is down

            second = _start(pg_dsn, bootstrap, log)
            try:
                wait_for(lambda: len(read_topic(bootstrap, TOPIC)) >= killed_at + 200, "more")
                stop.set()
                for w in writers:
                    w.join(DEADLINE_S)
                    assert w.error is None, w.error
                execute(pg_dsn, "INSERT INTO accounts VALUES (0, 0, 'the end')")
                wait_for(
                    lambda: any(r.key == {"id": 0} for r in read_topic(bootstrap, TOPIC)),
                    "the last row",
                )
            finally:
                second.send_signal(signal.SIGTERM)
                assert second.wait(DEADLINE_S) == 0, log_path.read_text()[-3000:]
        finally:
            stop.set()
            if first.poll() is None:
                first.kill()

    records = read_topic(bootstrap, TOPIC)
    committed = [change for w in writers for change in w.changes] + [("c", 0, 0)]
    captured = events(records)
    assert set(committed) - set(captured) == set(), "changes lost"
    assert set(captured) - set(committed) == set(), "changes that never happened"
    duplicated = {e: n for e, n in collections.Counter(captured).items() if n > 1}
    assert duplicated == {}, f"{len(duplicated)} changes written twice"
    positions = [r.position for r in records]
    assert len(positions) == len(set(positions))
    # every delete is followed by its tombstone
    for i, r in enumerate(records):
        if r.value is not None and r.value["op"] == "d":
            assert records[i + 1].value is None and records[i + 1].key == r.key
    assert fold(records) == table_rows(pg_dsn)
    stopped = [line for line in log_path.read_text().splitlines() if "capture stopped" in line]
    assert stopped, log_path.read_text()[-3000:]
    print(f"{len(committed)} changes, {len(records)} records, killed at {killed_at}: {stopped}")


class _DiesBeforeConfirming(PostgresCapture):
    """A capture that writes to the log but never tells PostgreSQL: as if it always crashed
    between the log's acknowledgement and the confirmation."""

    def _advance(self, cursor, *, force: bool = False) -> None:
        while self._pending and self._pending[0].committed and self._pending[0].outstanding == 0:
            self._pending.popleft()


def test_transactions_replayed_after_a_crash_are_not_written_twice(pg_dsn, bootstrap):
    execute(pg_dsn, "CREATE TABLE accounts (id int PRIMARY KEY, version int NOT NULL, note text)")
    slot = slot_for(pg_dsn)
    unconfirmed = _DiesBeforeConfirming(
        dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap, slot=slot
    )
    runner = threading.Thread(target=unconfirmed.run, daemon=True)
    runner.start()
    assert unconfirmed.ready.wait(DEADLINE_S)
    execute(pg_dsn, "INSERT INTO accounts VALUES (1, 0, 'a'), (2, 0, 'b')")
    execute(pg_dsn, "DELETE FROM accounts WHERE id = 1")
    wait_for(lambda: len(read_topic(bootstrap, TOPIC)) >= 4, "4 records")
    unconfirmed.stop()
    runner.join(DEADLINE_S)
    execute(pg_dsn, "UPDATE accounts SET version = 1 WHERE id = 2")

    # PostgreSQL replays all three transactions; only the update is new to the log
    with CaptureThread(dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap) as capture:
        wait_for(lambda: len(read_topic(bootstrap, TOPIC)) >= 5, "5 records")
        wait_for(lambda: capture.stats.confirmed_lsn, "the confirmation")
    records = read_topic(bootstrap, TOPIC)
    assert [(r.key["id"], r.value and r.value["op"]) for r in records] == [
        (1, "c"),
        (2, "c"),
        (1, "d"),
        (1, None),
        (2, "u"),
    ]
    assert capture.stats.skipped_records == 4
    assert capture.stats.records == 1


def test_kill_9_of_the_broker_mid_stream_loses_nothing_and_duplicates_nothing(pg_dsn, tmp_path):
    """The capture runs on; the idempotent producer retries into the restarted broker (same
    data directory and port), and the position is confirmed only for what the log holds."""
    execute(
        pg_dsn,
        "CREATE TABLE accounts (id int PRIMARY KEY, version int NOT NULL, note text)",
        "ALTER TABLE accounts REPLICA IDENTITY FULL",
    )
    data_dir = str(tmp_path / "broker")
    port = ("--port", str(free_port()))
    stop = threading.Event()
    writers = [Writer(pg_dsn, n, stop) for n in range(3)]
    broker = TidelogListener(data_dir, extra_args=port)
    broker.start()
    try:
        bootstrap = broker.bootstrap
        with CaptureThread(dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap) as capture:
            for w in writers:
                w.start()
            wait_for(lambda: len(read_topic(bootstrap, TOPIC)) >= 200, "200 records")
            broker.process.send_signal(signal.SIGKILL)
            broker.process.wait(DEADLINE_S)
            time.sleep(1)  # the writers and the capture go on while the broker is down
            broker = TidelogListener(data_dir, extra_args=port)
            broker.start()
            wait_for(lambda: len(read_topic(bootstrap, TOPIC)) >= 600, "600 records")
            stop.set()
            for w in writers:
                w.join(DEADLINE_S)
                assert w.error is None, w.error
            execute(pg_dsn, "INSERT INTO accounts VALUES (0, 0, 'the end')")
            wait_for(
                lambda: any(r.key == {"id": 0} for r in read_topic(bootstrap, TOPIC)),
                "the last row",
            )
            wait_for(lambda: not capture._pending, "every transaction confirmed")
        records = read_topic(bootstrap, TOPIC)
    finally:
        stop.set()
        broker.stop()

    committed = [change for w in writers for change in w.changes] + [("c", 0, 0)]
    captured = events(records)
    assert set(committed) - set(captured) == set(), "changes lost"
    assert set(captured) - set(committed) == set(), "changes that never happened"
    duplicated = {e: n for e, n in collections.Counter(captured).items() if n > 1}
    assert duplicated == {}, f"{len(duplicated)} changes written twice"
    assert fold(records) == table_rows(pg_dsn)


def _set_max_message_bytes(admin: AdminClient, limit: int) -> None:
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry(
                "max.message.bytes", str(limit), incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(DEADLINE_S)


def test_a_record_the_log_refuses_mid_transaction_stops_the_capture_unconfirmed(pg_dsn, bootstrap):
    """Only the last record of a transaction and topic carries a delivery callback. A record
    before it that the log refuses (here: in a batch over the topic's max.message.bytes) must
    still stop the capture with its transaction unconfirmed, and no later record may reach the
    log, or the gap would be skipped after a restart. Once the limit is raised, a restart writes
    the whole transaction: nothing lost, nothing written twice."""
    execute(pg_dsn, "CREATE TABLE accounts (id int PRIMARY KEY, version int NOT NULL, note text)")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "compact", "max.message.bytes": "100000"}
    admin.create_topics([NewTopic(TOPIC, 1, config=config)])[TOPIC].result(DEADLINE_S)
    small = 64_000  # the producer's batches stay under the limit...
    capture = CaptureThread(
        dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap, producer_config={"batch.size": small}
    )
    with pytest.raises(CaptureError, match="refused"), capture:
        execute(pg_dsn, "INSERT INTO accounts VALUES (0, 0, 'before')")
        wait_for(lambda: capture.capture.stats.confirmed_lsn, "the first confirmation")
        confirmed = _confirmed_lsn(pg_dsn)
        execute(  # ...but for the one with this row; the transaction's last row comes later
            pg_dsn,
            "INSERT INTO accounts SELECT 1, 0, string_agg(md5(g::text), '') "
            "FROM generate_series(1, 10000) g",  # 320 KB that do not compress to 100 KB
            "INSERT INTO accounts SELECT g, 0, repeat('n', 400) FROM generate_series(2, 400) g",
        )
        wait_for(lambda: capture.error is not None, "the capture to stop on the refusal")
    assert _confirmed_lsn(pg_dsn) == confirmed, "the refused transaction was confirmed"
    assert [r.key for r in read_topic(bootstrap, TOPIC)] == [{"id": 0}], "a gap in the log"

    _set_max_message_bytes(admin, 1_000_000)
    with CaptureThread(dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap) as again:
        wait_for(lambda: len(read_topic(bootstrap, TOPIC)) >= 401, "401 records")
        wait_for(lambda: not again._pending and again.stats.confirmed_lsn, "the confirmation")
    records = read_topic(bootstrap, TOPIC)
    assert [r.key["id"] for r in records] == list(range(401))
    assert fold(records) == table_rows(pg_dsn)
