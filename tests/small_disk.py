"""A small, real file system for disk-full tests: a tmpfs mounted for the test and removed
after it. Mounting needs root (CI runs the suite as root); elsewhere the tests that need one
are skipped with the reason, and under CI a failed mount fails them instead (the rule of
``tests/system_programs``: a broken set-up never passes as a silent skip)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system_programs import under_ci


@contextlib.contextmanager
def small_tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """Mount a tmpfs of `size_bytes` at `path` (created), yield it, unmount it."""
    reason = None
    if os.geteuid() != 0:
        reason = "disk-full tests mount a small tmpfs, which needs root (CI runs as root)"
    elif shutil.which("mount") is None:
        reason = "disk-full tests need mount(8) to mount a small tmpfs"
    if reason is None:
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            reason = f"could not mount a tmpfs at {path}: {done.stderr.strip()}"
    if reason is not None:
        if under_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path, leave_bytes: int) -> Path:
    """Write a filler file that leaves about `leave_bytes` free on `disk`; returns it (delete
    it to give the space back)."""
    filler = disk / "filler"
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    with open(filler, "wb") as f:
        f.write(b"\0" * max(free - leave_bytes, 0))
    return filler


def free_bytes(disk: Path) -> int:
    stat = os.statvfs(disk)
    return stat.f_bavail * stat.f_frsize
