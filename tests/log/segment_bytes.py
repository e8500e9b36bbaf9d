"""Test helper: where the record batches of a segment file lie, read from its bytes alone
(for tests that damage a chosen batch on disk)."""

from __future__ import annotations


def batches(path: str) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, next offset) of each batch, from the bytes."""
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(data):
        base = int.from_bytes(data[pos : pos + 8], "big")
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        last_delta = int.from_bytes(data[pos + 23 : pos + 27], "big")
        out.append((pos, size, base, base + last_delta + 1))
        pos += size
    return out
