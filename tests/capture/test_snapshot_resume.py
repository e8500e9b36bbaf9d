"""A snapshot goes on after a restart of the capture (a clean stop or a kill -9 mid-snapshot)
from the last chunk its progress topic records, neither starting over nor skipping rows."""

from __future__ import annotations

import signal
import subprocess
import threading

from tests.capture.helpers import (
    DEADLINE_S,
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
PROGRESS = "tidelog.__snapshots"


def _accounts(dsn: str, rows: int) -> None:
    execute(
        dsn,
        "CREATE TABLE accounts (id int PRIMARY KEY, version int NOT NULL, note text)",
        f"INSERT INTO accounts SELECT i, 0, 'n' || i FROM generate_series(1, {rows}) i",
    )


def _reads(records) -> list:
    return [r for r in records if r.value is not None and r.value["op"] == "r"]


def _progress(bootstrap: str) -> dict[str, dict]:
    """The progress topic folded: the last document of each snapshot, by id."""
    state: dict[str, dict] = {}
    for r in read_topic(bootstrap, PROGRESS, envelopes=False):
        state[r.key["id"]] = r.value
    return state


def test_a_snapshot_stopped_midway_goes_on_from_its_last_chunk_after_a_restart(pg_dsn, bootstrap):
    _accounts(pg_dsn, 2000)
    with CaptureThread(
        dsn=pg_dsn,
        tables=["accounts"],
        bootstrap=bootstrap,
        snapshot_tables=["accounts"],
        chunk_rows=100,
    ) as first:
        job = first.snapshots[0]
        wait_for(lambda: job.chunks >= 5, "5 chunks")
    assert not job.done
    stopped_at = len(read_topic(bootstrap, TOPIC))
    assert stopped_at == job.rows_written == job.chunks * 100
    [recorded] = _progress(bootstrap).values()  # a clean stop records every chunk written
    assert (recorded["chunks"], recorded["last_key"], recorded["done"]) == (
        job.chunks,
        [job.chunks * 100],
        False,
    )

    # no snapshot asked for: the unfinished one goes on by itself
    with CaptureThread(dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap) as second:
        [resumed] = second.snapshots
        assert resumed.id == job.id
        assert resumed.resumed_from is not None
        assert resumed.resumed_from["chunks"] == job.chunks
        assert resumed.resumed_from["last_key"] == [job.chunks * 100]
        wait_for(lambda: resumed.done, "the resumed snapshot")
        wait_for(lambda: _progress(bootstrap)[job.id]["done"], "the last progress record")
    records = read_topic(bootstrap, TOPIC)
    assert [r.key["id"] for r in _reads(records)] == list(range(1, 2001))  # each row once
    assert fold(records) == table_rows(pg_dsn)
    # 20 full chunks and an empty one, counted across both runs; the second read 2000 - 100 * n
    assert resumed.chunks == 21 and resumed.rows_written == 2000
    assert resumed.rows_selected - resumed.resumed_from["rows_selected"] == 2000 - stopped_at
    final = _progress(bootstrap)[job.id]
    assert final["done"] and final["chunks"] == 21 and final["rows_written"] == 2000
    assert final["as_of_offset"] == records[-1].offset
    assert final["resumed_from"]["chunks"] == job.chunks


def test_kill_9_mid_snapshot_under_concurrent_writes_resumes_without_rereading_the_table(
    pg_dsn, bootstrap, tmp_path
):
    rows, chunk = 5000, 100
    _accounts(pg_dsn, rows)
    log_path = tmp_path / "capture.log"
    cmd = [
        *capture_command(pg_dsn, "accounts", bootstrap, "--slot", slot_for(pg_dsn)),
        "--snapshot",
        "--chunk-rows",
        str(chunk),
    ]
    stop = threading.Event()
    # rows 1-39, 3001-3039 and 4001-4039: changes inside chunks read before and after the kill
    writers = [Writer(pg_dsn, n, stop, existing=rows) for n in (0, 3, 4)]
    with open(log_path, "ab") as log:
        first = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=log)
        second = None
        try:
            for w in writers:
                w.start()
            wait_for(
                lambda: len(_reads(read_topic(bootstrap, TOPIC))) >= 1500,
                "1500 rows snapshotted",
                timeout=120,
            )
            first.send_signal(signal.SIGKILL)
            assert first.wait(DEADLINE_S) == -signal.SIGKILL
            killed_at = read_topic(bootstrap, TOPIC)
            read_before = len(_reads(killed_at))

            # the same command again: --snapshot does not start a second snapshot of the table
            second = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=log)
            wait_for(
                lambda: any(d["done"] for d in _progress(bootstrap).values()),
                "the resumed snapshot",
                timeout=180,
            )
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
            stop.set()
            if first.poll() is None:
                first.kill()
            if second is not None:
                second.send_signal(signal.SIGTERM)
                assert second.wait(DEADLINE_S) == 0, log_path.read_text()[-3000:]

    records = read_topic(bootstrap, TOPIC)
    assert fold(records) == table_rows(pg_dsn), "the topic differs from the table"
    # what the second run read: the rest of the table from the last recorded key on (a chunk
    # acknowledged after the last progress record is read again), not the table from the start
    read_after = len(_reads(records[len(killed_at) :]))
    assert read_after < rows - read_before + 5 * chunk, (read_before, read_after)
    [final] = _progress(bootstrap).values()  # one snapshot, resumed, not a second one
    assert final["done"] and final["resumed_from"] is not None
    resumed = final["resumed_from"]
    assert resumed["chunks"] >= 5 and resumed["last_key"] is not None
    assert final["rows_selected"] - resumed["rows_selected"] <= rows - resumed["last_key"][0]
    # and no row skipped: every key up to the end was read by one run or the other, or changed
    every_read = {r.key["id"] for r in _reads(records)}
    changed = {key for w in writers for _, key, _ in w.changes}
    assert set(range(1, rows + 1)) - every_read - changed == set()
    assert "resuming snapshot of public.accounts after key" in log_path.read_text()
    print(f"{read_before} rows read before the kill, {read_after} after; final {final}")


def test_a_snapshot_asked_for_but_not_started_survives_a_restart(pg_dsn, bootstrap):
    _accounts(pg_dsn, 30)
    with CaptureThread(dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap) as first:
        first.pause_snapshots()
        waiting = first.request_snapshot("accounts", keys=[{"id": 3}, {"id": 4}])
        wait_for(lambda: waiting.id in _progress(bootstrap), "its progress record")
    assert waiting.chunks == 0 and not waiting.done

    with CaptureThread(dsn=pg_dsn, tables=["accounts"], bootstrap=bootstrap) as second:
        [resumed] = second.snapshots
        assert (resumed.id, resumed.keys) == (waiting.id, [{"id": 3}, {"id": 4}])
        assert resumed.resumed_from == {
            "last_key": None,
            "chunks": 0,
            "rows_selected": 0,
            "rows_written": 0,
            "as_of_offset": None,
        }
        wait_for(lambda: resumed.done, "the snapshot of two keys")
    records = read_topic(bootstrap, TOPIC)
    assert [(r.key["id"], r.value["op"]) for r in records] == [(3, "r"), (4, "r")]
