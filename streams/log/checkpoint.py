"""Checkpoint files: small text files of per-partition offsets, written atomically.

Format, as Kafka's ``CheckpointFile``: a version line (0), a count line, then one
``topic partition offset`` line per partition. Written to a temporary file, fsynced, then
renamed over the old one, so a crash leaves either the old or the new file, never a mix.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

VERSION = 0


def write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())
    ]
    write_atomic(path, ("\n".join(lines) + "\n").encode())


def read(path: str) -> dict[tuple[str, int], int]:
    """Offsets from a checkpoint file; an unreadable file counts as absent (and is logged)."""
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != VERSION:
            raise ValueError(f"unknown version {lines[0]}")
        count = int(lines[1])
        entries = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            entries[(topic, int(partition))] = int(offset)
        if len(entries) != count:
            raise ValueError(f"expected {count} entries, found {len(entries)}")
        return entries
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}
