"""CaptureSources: capture sources started, watched and stopped inside the broker's process
(what the console's Capture page drives), against a real PostgreSQL and the broker's listener."""

from __future__ import annotations

import pytest

from streams.capture.postgres import CaptureError
from streams.capture.sources import CaptureSources, mask_dsn
from tests.capture.helpers import execute, read_topic, table_rows, wait_for


@pytest.fixture
def sources(bootstrap):
    s = CaptureSources(lambda: bootstrap)
    yield s
    s.close()


def test_a_source_snapshots_streams_reports_and_stops(sources, pg_dsn, bootstrap):
    execute(
        pg_dsn,
        "CREATE TABLE accounts (id int PRIMARY KEY, version int, name text)",
        "INSERT INTO accounts SELECT g, 0, 'a' FROM generate_series(1, 50) g",
    )
    status = sources.start("shop", dsn=pg_dsn, tables=["accounts"], snapshot=True)
    assert status.state == "running"
    assert status.slot == "tidelog_shop" and status.topics == ["shop.public.accounts"]

    done = wait_for(
        lambda: (s := sources.status("shop")).snapshots and s.snapshots[0].done and s,
        "the snapshot to finish",
    )
    snap = done.snapshots[0]
    assert snap.table == "public.accounts" and snap.rows_written == 50 and snap.keys is None
    assert snap.as_of_lsn is not None
    wait_for(lambda: sources.status("shop").snapshots[0].as_of_offset is not None, "its offset")
    records = read_topic(bootstrap, "shop.public.accounts")
    snap_offset = sources.status("shop").snapshots[0].as_of_offset
    assert records[snap_offset].value["op"] == "r"  # the offset of a snapshot record

    execute(pg_dsn, "UPDATE accounts SET version = 1 WHERE id <= 10")
    later = wait_for(
        lambda: (s := sources.status("shop")).records >= 60 and s.lag_bytes == 0 and s,
        "the update to be captured and confirmed",
    )
    assert later.transactions >= 1 and later.lag_seconds >= 0.0
    assert later.confirmed_lsn != "0/0"

    stopped = sources.stop("shop")
    assert stopped.state == "stopped" and stopped.error is None
    assert len(table_rows(pg_dsn)) == 50

    with pytest.raises(CaptureError, match="start it first"):
        sources.request_snapshot("shop", "accounts")


def test_a_table_without_a_primary_key_is_refused_and_the_source_shows_why(sources, pg_dsn):
    execute(pg_dsn, "CREATE TABLE events (at timestamptz, what text)")
    with pytest.raises(CaptureError, match="primary key"):
        sources.start("nokey", dsn=pg_dsn, tables=["events"])
    status = sources.status("nokey")
    assert status.state == "failed" and "primary key" in status.error
    assert status.lag_bytes is None and status.lag_note == "no replication slot (yet)"


def test_bad_input_is_refused_before_anything_starts(pg_dsn):
    sources = CaptureSources(lambda: None)
    with pytest.raises(CaptureError, match="Kafka listener"):
        sources.start("a", dsn=pg_dsn, tables=["t"])
    with pytest.raises(CaptureError, match="lower-case"):
        sources.start("Bad Name", dsn=pg_dsn, tables=["t"])
    with pytest.raises(CaptureError, match="at least one table"):
        sources.start("a", dsn=pg_dsn, tables=[" "])
    assert sources.sources() == []


@pytest.mark.parametrize(
    ("dsn", "masked"),
    [
        ("host=db user=u password=secret dbname=x", "host=db user=u password=*** dbname=x"),
        ("host=db password='s e c' dbname=x", "host=db password=*** dbname=x"),
        ("postgresql://u:secret@db:5432/x", "postgresql://u:***@db:5432/x"),
        ("host=db dbname=x", "host=db dbname=x"),
    ],
)
def test_passwords_are_masked(dsn, masked):
    assert mask_dsn(dsn) == masked
