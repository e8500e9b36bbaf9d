"""``manage.py verify_log [--topic T] [--repair]`` (issue 10, item 5): every damaged range on
disk reported with what a repair cuts; ``--repair`` cuts only the damaged bytes, is audited,
and leaves every other record readable. The data directory is written through the streams API,
closed, damaged, then opened by the command as from a shell."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from brokerui.audit.models import AuditEntry
from streams.errors import LogDamaged
from streams.log import LogStore, ProducerRecord
from tests.log.segment_bytes import batches as _batches

REPO = Path(__file__).resolve().parents[2]
CONFIG = {"segment.bytes": "4096", "index.interval.bytes": "512"}


@pytest.fixture
def damaged_dir(settings, tmp_path, db):
    """`orders` (2 partitions, several segments each), `clean` (1 partition); one batch in a
    closed segment of orders-1 has a flipped byte. Returns (path, that batch's offsets)."""
    path = tmp_path / "data"
    settings.TIDELOG_DATA_DIR = path
    with LogStore.open(str(path), background=False) as store:
        store.create_topic("orders", 2, CONFIG)
        store.create_topic("clean", 1)
        for i in range(300):
            records = [ProducerRecord(b"order %d/%d" % (i, j) + b" " * 20, b"k") for j in range(3)]
            store.append_batch("orders", records, partition=i % 2)
        store.append("clean", b"fine")
        values = {r.offset: r.value for r in store.read("orders", 1, 0, 10_000, 1 << 30)}
    segment = sorted((path / "orders-1").glob("*.log"))[1]
    pos, size, first, end = _batches(str(segment))[4]
    with open(segment, "r+b") as f:
        f.seek(pos + size - 5)
        byte = f.read(1)[0]
        f.seek(pos + size - 5)
        f.write(bytes([byte ^ 0x21]))
    return path, segment.name, pos, size, first, end, values


def _run(*args) -> tuple[str, str | None]:
    out = io.StringIO()
    try:
        call_command("verify_log", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), None


def test_reports_every_damaged_range_and_what_repair_would_cut(damaged_dir):
    path, name, pos, size, first, end, _ = damaged_dir
    out, error = _run()
    assert error == "1 damaged range(s) left"
    assert "clean-0: 1 segment, 1 batch, 72 bytes: OK" in out
    assert "orders-0: 7 segments, 150 batches" in out and out.count(": OK") == 2
    assert "orders-1: 7 segments, 149 batches" in out and "1 damaged range\n" in out
    assert (
        f"DAMAGED  offsets {first}..{end - 1} in {name}, bytes {pos:,}..{pos + size - 1:,}" in out
    )
    assert (
        f"repair would cut bytes {pos:,}..{pos + size - 1:,} ({size:,} bytes) of {name}; "
        f"offsets {first}..{end - 1} are lost; the batches before and after keep their offsets"
    ) in out
    assert "Run again with --repair" in out
    assert not AuditEntry.objects.exists()
    with LogStore.open(str(path), background=False) as store:  # reported = recorded
        with pytest.raises(LogDamaged):
            store.read("orders", 1, first)


def test_repair_cuts_only_the_damage_and_is_audited(damaged_dir):
    path, name, pos, size, first, end, before = damaged_dir
    out, error = _run("--topic", "orders", "--repair")
    assert error is None, out
    assert f"REPAIRED offsets {first}..{end - 1} in {name}" in out
    assert "Repaired 1 damaged range: 3 offsets lost, every other record kept (audited)." in out
    entry = AuditEntry.objects.get(action="log.repair")
    assert entry.source == "cli" and entry.target == "topic orders partition 1"
    assert entry.username.startswith("cli:")
    assert entry.after == {"offsets_lost": end - first, "bytes_cut": size}
    assert entry.before["damaged"][0]["offsets"] == [first, end]

    out, error = _run()
    assert error is None and "verified: no damage" in out
    with LogStore.open(str(path), background=False) as store:
        audit = [json.loads(r.value) for r in store.read("__audit", 0, 0)]
        assert [a["action"] for a in audit] == ["log.repair"]
        start, stop = store.offsets("orders", 1)
        got, offset = {}, start
        while offset < stop:
            records = store.read("orders", 1, offset, max_records=10_000, max_bytes=1 << 30)
            got.update((r.offset, r.value) for r in records)
            offset = records[-1].offset + 1
    assert got == {o: v for o, v in before.items() if not first <= o < end}


def test_refuses_a_running_servers_directory_and_unknown_topics(damaged_dir):
    path = damaged_dir[0]
    with LogStore.open(str(path), background=False):
        out, error = _run()
        assert error is not None and "in use by" in error
    out, error = _run("--topic", "nope")
    assert error == "topic 'nope' does not exist"


def test_runs_from_a_shell_with_exit_status_1_while_damage_remains(damaged_dir):
    path = damaged_dir[0]
    env = {**os.environ, "TIDELOG_DATA_DIR": str(path)}
    done = subprocess.run(
        [sys.executable, "manage.py", "verify_log"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "DAMAGED  offsets" in done.stdout, done.stderr
