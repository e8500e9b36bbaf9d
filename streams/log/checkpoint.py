"""Checkpoint files: small text files of per-partition offsets, written atomically.

Format, as Kafka's ``CheckpointFile``: a version line (0), a count line, then one
``topic partition offset`` line per partition. Written to a temporary file, fsynced, then
renamed over the old one, so a crash leaves either the old or the new file, never a mix.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets

log = logging.getLogger(__name__)

VERSION = 0
TMP_SUFFIX = ".tmp"
_TMP_STEM = 200  # a temporary name stays under NAME_MAX (255) whatever the target's length


def tmp_path(path: str) -> str:
    """A fresh temporary name next to `path`: ``.<name, cut to 200 characters>.<random>.tmp``.

    Never ``<path>.tmp``: a topic's metadata file may already use 254 of the 255 characters a
    file name may have (249-character topic names, as Kafka allows), and two writers of the
    same file must not share one temporary file."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name[:_TMP_STEM]}.{secrets.token_hex(4)}{TMP_SUFFIX}")


def remove_leftover_tmp(directory: str) -> None:
    """Delete the temporary files of writes a crash interrupted (they never replaced a file)."""
    for name in os.listdir(directory):
        if name.startswith(".") and name.endswith(TMP_SUFFIX):
            log.info("%s: removing %s, left by an interrupted write", directory, name)
            os.unlink(os.path.join(directory, name))


def write_atomic(path: str, data: bytes) -> None:
    tmp = tmp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):  # a full disk can take part of a write without an error
            raise OSError(errno.ENOSPC, f"short write to {tmp}: {written} of {len(data)} bytes")
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write(path: str, offsets: dict[tuple[str, int], int | tuple[int, ...]]) -> None:
    """One line per partition: its offset, or several numbers (``read(path, width)``)."""
    lines = [str(VERSION), str(len(offsets))]
    lines += [
        f"{topic} {partition} {_values(value)}"
        for (topic, partition), value in sorted(offsets.items())
    ]
    write_atomic(path, ("\n".join(lines) + "\n").encode())


def _values(value: int | tuple[int, ...]) -> str:
    return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def read(path: str, width: int = 1) -> dict:
    """Offsets from a checkpoint file (tuples of `width` numbers when `width` > 1); an
    unreadable file counts as absent (and is logged)."""
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
            topic, partition, *values = line.split(" ")
            if len(values) != width:
                raise ValueError(f"expected {width} numbers in {line!r}")
            numbers = tuple(int(v) for v in values)
            entries[(topic, int(partition))] = numbers if width > 1 else numbers[0]
        if len(entries) != count:
            raise ValueError(f"expected {count} entries, found {len(entries)}")
        return entries
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}
