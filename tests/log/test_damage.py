"""Damaged segments (issue 10, item 5): found at open even after a clean shutdown, refused by
reads instead of served, never a reason to lose the records after them, reported and cut out
by verify_store / repair.

Before: a clean start noticed nothing, reads served garbled records (or stalled at a damaged
length), and the next unclean recovery cut the log at the damage, deleting records appended
and acknowledged after the clean restart."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest

from streams.errors import LogDamaged
from streams.log import LogStore, ProducerRecord
from streams.log import damage as damage_file
from streams.log.verify import verify_store
from tests.log.segment_bytes import batches as _batches

TOPIC = "d"
CONFIG = {"segment.bytes": str(64 * 1024), "index.interval.bytes": "512"}


def _records(first: int, n: int) -> list[ProducerRecord]:
    return [
        ProducerRecord(b"value-%05d-" % i + b"v" * 40, b"k%d" % i) for i in range(first, first + n)
    ]


def _fill(store, batches: int, first: int = 0) -> list[bytes]:
    values = []
    for b in range(batches):
        recs = _records(first + 5 * b, 5)
        store.append_batch(TOPIC, recs, partition=0)
        values += [r.value for r in recs]
    return values


def _flip(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0x5A]))


def _segment_files(data, partition: int = 0) -> list[str]:
    d = os.path.join(data, f"{TOPIC}-{partition}")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".log"))


def _readable(store) -> dict[int, bytes]:
    """offset -> value of every readable record, stepping over damaged ranges."""
    plog = store.partition_log(TOPIC, 0)
    out, offset = {}, plog.log_start_offset
    while offset < plog.high_watermark:
        try:
            got = store.read(TOPIC, 0, offset, max_records=1000)
        except LogDamaged:
            offset = next(d.end_offset for d in plog.damaged if d.covers(offset))
            continue
        out.update((r.offset, r.value) for r in got)
        offset = got[-1].offset + 1 if got else plog.high_watermark
    return out


def _crash(data) -> None:
    """As after kill -9 before any checkpoint: no clean-shutdown marker, no recovery point,
    so the whole log is re-validated."""
    os.unlink(os.path.join(data, ".clean-shutdown"))
    os.unlink(os.path.join(data, "recovery-point-offset-checkpoint"))


@pytest.fixture
def data(tmp_path):
    path = str(tmp_path / "data")
    with LogStore.open(path, background=False) as store:
        store.create_topic(TOPIC, 1, CONFIG)
        values = _fill(store, 20)  # offsets 0..99, one segment
    return path, values


def test_a_clean_start_finds_damage_and_no_crash_loses_what_follows(data, caplog):
    path, values = data
    active = _segment_files(path)[-1]
    pos, size, base, nxt = _batches(active)[8]  # offsets 40..44
    _flip(active, pos + size // 2)

    with caplog.at_level(logging.WARNING):
        store = LogStore.open(path, background=False)  # a clean start
    plog = store.partition_log(TOPIC, 0)
    assert [(d.first_offset, d.end_offset) for d in plog.damaged] == [(40, 45)]
    assert f"{TOPIC}-0: damaged log: offsets 40..44 in 00000000000000000000.log" in caplog.text
    assert len(plog.segments) == 2  # the damaged segment was closed: no append behind damage
    with pytest.raises(LogDamaged, match="offset 42 cannot be read"):
        store.read(TOPIC, 0, 42)
    assert [r.offset for r in store.read(TOPIC, 0, 35)] == [35, 36, 37, 38, 39]
    assert store.read(TOPIC, 0, 45)[0].value == values[45]
    after = _fill(store, 4, first=100)  # acknowledged after the clean restart: 100..119
    store.close()

    _crash(path)  # then kill -9: recovery re-validates the whole log
    with LogStore.open(path, background=False) as store:
        got = _readable(store)
        assert got == {o: v for o, v in enumerate(values + after) if not 40 <= o < 45}
        assert [(d.first_offset, d.end_offset) for d in store.partition_log(TOPIC, 0).damaged] == [
            (40, 45)
        ]
        assert store.append(TOPIC, b"next", partition=0).offset == 120


def test_a_damaged_length_does_not_stall_reads_and_costs_one_batch(data):
    path, values = data
    active = _segment_files(path)[-1]
    pos, _, _, _ = _batches(active)[5]  # offsets 25..29
    with open(active, "r+b") as f:
        f.seek(pos + 8)
        f.write((10**6).to_bytes(4, "big"))  # the batch now claims to run past the file
    with LogStore.open(path, background=False) as store:
        assert [(d.first_offset, d.end_offset) for d in store.partition_log(TOPIC, 0).damaged] == [
            (25, 30)
        ]
        with pytest.raises(LogDamaged):
            store.read(TOPIC, 0, 25)
        assert _readable(store) == {o: v for o, v in enumerate(values) if not 25 <= o < 30}


def test_damage_met_by_a_read_is_refused_recorded_and_the_segment_closed(data, caplog):
    path, values = data
    store = LogStore.open(path, background=False)
    try:
        active = _segment_files(path)[-1]
        pos, size, _, _ = _batches(active)[3]  # offsets 15..19, damaged under a running store
        _flip(active, pos + size - 3)
        assert [r.offset for r in store.read(TOPIC, 0, 10)] == [10, 11, 12, 13, 14]
        with caplog.at_level(logging.ERROR), pytest.raises(LogDamaged):
            store.read(TOPIC, 0, 15)
        assert "offsets 15..19 in 00000000000000000000.log" in caplog.text
        with pytest.raises(LogDamaged):
            store.read_batches(TOPIC, 0, 17, 1 << 20)
        plog = store.partition_log(TOPIC, 0)
        assert len(plog.segments) == 2  # closed behind the damage
        assert store.append(TOPIC, b"after", partition=0).offset == 100
        recorded = json.load(open(os.path.join(plog.directory, damage_file.FILE)))["ranges"]
        assert [(r["first_offset"], r["end_offset"]) for r in recorded] == [(15, 20)]
    finally:
        store.close()
    with LogStore.open(path, background=False) as store:  # remembered across a restart
        assert [(d.first_offset, d.end_offset) for d in store.partition_log(TOPIC, 0).damaged] == [
            (15, 20)
        ]


def test_verify_reports_damage_and_repair_cuts_only_the_damaged_bytes(tmp_path):
    path = str(tmp_path / "data")
    with LogStore.open(path, background=False) as store:
        store.create_topic(TOPIC, 2, CONFIG)
        values = _fill(store, 400)  # several segments
        store.append(TOPIC, b"p1", partition=1)
    files = _segment_files(path)
    assert len(files) >= 3
    middle = files[1]
    b = _batches(middle)
    _flip(middle, b[2][0] + 30)  # a closed segment, not checked at open
    _flip(middle, b[-1][0] + 30)  # its tail too
    with LogStore.open(path, background=False) as store:
        assert store.partition_log(TOPIC, 0).damaged == ()  # closed segments: found by verify
        report = verify_store(store)
        found = [(d.first_offset, d.end_offset) for _, d in report.damaged]
        assert found == [(b[2][2], b[2][3]), (b[-1][2], b[-1][3])]
        assert {(p.topic, p.partition, p.ok) for p in report.partitions} == {
            (TOPIC, 0, False),
            (TOPIC, 1, True),
        }
        with pytest.raises(LogDamaged):
            store.read(TOPIC, 0, b[2][2])

        repaired = verify_store(store, topic=TOPIC, repair=True)
        assert [(d.first_offset, d.end_offset) for _, d in repaired.repaired] == found
        lost = set(range(b[2][2], b[2][3])) | set(range(b[-1][2], b[-1][3]))
        expected = {o: v for o, v in enumerate(values) if o not in lost}
        assert _readable(store) == expected
        assert [r.offset for r in store.read(TOPIC, 0, b[2][2], max_records=1)] == [b[2][3]]
        assert verify_store(store).damaged == []
        end = store.partition_log(TOPIC, 0).log_end_offset
    shutil.copytree(path, str(tmp_path / "crashed"))
    _crash(str(tmp_path / "crashed"))
    for where in (path, str(tmp_path / "crashed")):  # clean, and a full recovery
        with LogStore.open(where, background=False) as store:
            assert store.partition_log(TOPIC, 0).damaged == ()
            assert _readable(store) == expected
            assert store.append(TOPIC, b"more", partition=0).offset == end


def test_a_topic_recreated_after_a_delete_does_not_inherit_its_recovery_point(tmp_path):
    """The recovery point is the last verified point: a re-created topic with a stale one from
    its predecessor would look like a log missing offsets after a crash."""
    path = str(tmp_path / "data")
    store = LogStore.open(path, background=False)
    store.create_topic(TOPIC, 1)
    _fill(store, 10)
    store.write_checkpoints()  # the maintenance thread's periodic checkpoint
    store.delete_topic(TOPIC)
    store.create_topic(TOPIC, 1)
    store.append(TOPIC, b"one", partition=0)
    for p in store.all_partitions():  # then kill -9
        p.close()
    store._unlock()
    with LogStore.open(path, background=False) as again:
        assert again.partition_log(TOPIC, 0).damaged == ()
        assert again.offsets(TOPIC, 0) == (0, 1)


def test_the_last_verified_point_spares_a_clean_start_the_batch_walk(data, monkeypatch):
    """A clean shutdown records the active segment's verified position and its CRC-32C; the
    next start checks the whole file against it at C speed and walks batch by batch only
    past that point (here: bytes appended while the broker was down, which are cut)."""
    path, values = data
    with open(os.path.join(path, "verified-position-checkpoint")) as f:
        lines = f.read().splitlines()
    assert lines[:2] == ["0", "1"] and lines[2].startswith(f"{TOPIC} 0 0 ")
    walked = []
    real = damage_file.walk
    monkeypatch.setattr(damage_file, "walk", lambda *a, **k: walked.append(a[1:3]) or real(*a, **k))
    with LogStore.open(path, background=False) as store:
        assert walked == [] and store.offsets(TOPIC, 0) == (0, 100)
    active = _segment_files(path)[-1]
    size = os.path.getsize(active)
    with open(active, "ab") as f:
        f.write(b"\x00" * 40 + b"not a batch")
    with LogStore.open(path, background=False) as store:
        # only from the index entry before the verified point on
        assert len(walked) == 1 and size - 1024 < walked[0][0] <= size < walked[0][1]
        assert store.partition_log(TOPIC, 0).damaged == ()
        assert _readable(store) == dict(enumerate(values))
    assert os.path.getsize(active) == size  # cut: nothing there was ever acknowledged


def test_damage_below_the_log_start_is_no_longer_reported(data):
    path, _ = data
    active = _segment_files(path)[-1]
    pos, size, _, _ = _batches(active)[2]  # offsets 10..14
    _flip(active, pos + size - 2)
    with LogStore.open(path, background=False) as store:
        plog = store.partition_log(TOPIC, 0)
        assert [(d.first_offset, d.end_offset) for d in plog.damaged] == [(10, 15)]
        store.delete_records(TOPIC, {0: 15})
        assert plog.damaged == ()
        assert store.describe_topic(TOPIC).partitions[0].damaged == ()
