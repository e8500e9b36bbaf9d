"""Opening after recovery must not rescan closed segments on every later open."""

from __future__ import annotations

import logging
import os

from streams.log import LogStore
from streams.log.segment import LogSegment


def test_segments_rebuilt_by_recovery_are_trusted_on_the_next_clean_open(
    tmp_path, caplog, monkeypatch
):
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("t", 1, {"segment.bytes": "2048"})
        for i in range(200):
            store.append("t", b"v%03d" % i, partition=0)
        assert len(store.partition_log("t", 0).segments) > 3
    # an unclean stop whose last checkpoint predates every roll: recovery rebuilds them all
    os.unlink(tmp_path / ".clean-shutdown")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    with LogStore.open(tmp_path, background=False) as store:
        assert store.offsets("t", 0) == (0, 200)
    caplog.clear()
    caplog.set_level(logging.INFO)
    rebuilt = []
    original = LogSegment.rebuild_from
    monkeypatch.setattr(
        LogSegment, "rebuild_from", lambda seg, pos: rebuilt.append(seg) or original(seg, pos)
    )
    with LogStore.open(tmp_path, background=False) as store:
        assert store.offsets("t", 0) == (0, 200)
        assert [r.value for r in store.read("t", 0, 150, 3)] == [b"v150", b"v151", b"v152"]
    assert rebuilt == [], "a clean open rescanned segments"
    assert "rebuilding" not in caplog.text and "disagrees" not in caplog.text


def test_read_from_the_middle_of_a_large_batch_skips_by_length(tmp_path):
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("t", 1)
        store.append_batch("t", [(b"x" * (i % 300), b"k%d" % i) for i in range(5000)], partition=0)
        for off in (0, 1, 127, 128, 2500, 4999):
            got = store.read("t", 0, off, max_records=3)
            assert [r.offset for r in got] == list(range(off, min(off + 3, 5000)))
            assert got[0].key == b"k%d" % off and got[0].value == b"x" * (off % 300)
