"""DBLog snapshots lined up with the stream: chunks by primary key between watermarks written
through the change stream, a row changed inside its chunk's window dropped from the chunk."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pytest

from streams.capture import snapshot
from streams.capture.postgres import CaptureError
from tests.capture.helpers import (
    CaptureThread,
    Writer,
    capture_command,
    execute,
    fold,
    read_topic,
    slot_for,
    table_rows,
    wait_for,
)
from tests.kafka_servers import REPO_ROOT

TOPIC = "tidelog.public.accounts"


def _accounts(dsn: str, rows: int) -> None:
    execute(
        dsn,
        "CREATE TABLE accounts (id int PRIMARY KEY, version int NOT NULL, note text)",
        f"INSERT INTO accounts SELECT i, 0, 'n' || i FROM generate_series(1, {rows}) i",
    )


def test_a_snapshot_under_concurrent_writes_leaves_the_topic_equal_to_thetable_rows(
    pg_dsn, bootstrap
):
    _accounts(pg_dsn, 2500)
    stop = threading.Event()
    writers = [Writer(pg_dsn, n, stop, existing=2500) for n in range(3)]
    for w in writers:
        w.start()
    try:
        with CaptureThread(
            dsn=pg_dsn,
            tables=["accounts"],
            bootstrap=bootstrap,
            snapshot_tables=["accounts"],
            chunk_rows=100,
        ) as capture:
            job = capture.snapshots[0]
            wait_for(lambda: job.done, "the snapshot", timeout=120)
            stop.set()
            for w in writers:
                w.join(30)
                assert w.error is None, w.error
            execute(pg_dsn, "INSERT INTO accounts VALUES (0, 0, 'the end')")
            wait_for(
                lambda: any(r.key == {"id": 0} for r in read_topic(bootstrap, TOPIC)),
                "the last row",
            )
    finally:
        stop.set()
    records = read_topic(bootstrap, TOPIC)
    assert fold(records) == table_rows(pg_dsn)
    reads = [r for r in records if r.value is not None and r.value["op"] == "r"]
    assert len(reads) == job.rows_written
    assert job.rows_selected == job.rows_written + job.rows_dropped >= 2500 - 120
    assert job.chunks >= 25 and job.as_of_lsn > 0
    assert all(r.value["source"]["snapshot"] == "incremental" for r in reads)
    assert sum(len(w.changes) for w in writers) > 0


def test_a_row_changed_between_the_select_and_the_high_watermark_is_dropped_from_the_chunk(
    pg_dsn, bootstrap, monkeypatch
):
    """The select sees version 0 of row 5; an update commits before the high watermark: the
    stream's update wins and the chunk must not write the stale row after it."""
    _accounts(pg_dsn, 10)
    write_inside = threading.Event()
    real_watermark = snapshot.watermark

    def watermark(conn, kind, window_id):
        if kind == "high" and not write_inside.is_set():
            write_inside.set()
            execute(pg_dsn, "UPDATE accounts SET version = 1 WHERE id = 5")
        real_watermark(conn, kind, window_id)

    monkeypatch.setattr(snapshot, "watermark", watermark)
    with CaptureThread(
        dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap, snapshot_tables=["accounts"]
    ) as capture:
        job = capture.snapshots[0]
        wait_for(lambda: job.done, "the snapshot")
    records = read_topic(bootstrap, TOPIC)
    assert [(r.key["id"], r.value["op"]) for r in records] == [(5, "u")] + [
        (i, "r") for i in range(1, 11) if i != 5
    ]
    assert records[0].value["after"]["version"] == 1
    assert (job.rows_selected, job.rows_written, job.rows_dropped) == (10, 9, 1)
    assert fold(records) == table_rows(pg_dsn)


def test_snapshots_of_chosen_keys_and_pause_resume(pg_dsn, bootstrap):
    _accounts(pg_dsn, 30)
    with CaptureThread(dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap) as capture:
        with pytest.raises(CaptureError, match=r"a key of public.accounts names \['id'\]"):
            capture.request_snapshot("accounts", keys=[{"name": "x"}])
        with pytest.raises(CaptureError, match="public.other is not captured"):
            capture.request_snapshot("other")
        keys = capture.request_snapshot("accounts", keys=[{"id": 7}, {"id": 21}, {"id": 99}])
        wait_for(lambda: keys.done, "the keys' snapshot")
        capture.pause_snapshots()
        whole = capture.request_snapshot("public.accounts")
        time.sleep(1)
        assert (whole.chunks, whole.rows_selected) == (0, 0)  # paused: no chunk started
        capture.resume_snapshots()
        wait_for(lambda: whole.done, "the whole snapshot")
    records = read_topic(bootstrap, TOPIC)
    assert [r.key["id"] for r in records[:2]] == [7, 21]
    assert [r.key["id"] for r in records[2:]] == list(range(1, 31))
    assert fold(records) == table_rows(pg_dsn)


def test_the_command_line_snapshots_with_snapshot(pg_dsn, bootstrap, tmp_path):
    _accounts(pg_dsn, 50)
    log_path = tmp_path / "capture.log"
    cmd = capture_command(pg_dsn, "accounts", bootstrap, "--slot", slot_for(pg_dsn))
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [*cmd, "--snapshot", "--chunk-rows", "20"], cwd=REPO_ROOT, stdout=log, stderr=log
        )
        try:
            wait_for(lambda: len(read_topic(bootstrap, TOPIC)) >= 50, "50 records")
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(60) == 0, log_path.read_text()[-3000:]
    records = read_topic(bootstrap, TOPIC)
    assert [(r.key["id"], r.value["op"]) for r in records] == [(i, "r") for i in range(1, 51)]
    assert fold(records) == table_rows(pg_dsn)
    assert "snapshot of public.accounts done: 50 rows in 3 chunks" in log_path.read_text()
