"""Choosing a partition for a record, exactly as Kafka's Java client does.

Keyed records go to ``toPositive(murmur2(key)) % partitions`` (``BuiltInPartitioner``);
records without a key stick to one partition per batch and move on to the next for the next batch,
so unkeyed traffic spreads evenly without splitting a batch.
"""

from __future__ import annotations

import itertools
import threading

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2 with seed 0x9747b28c, as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end4 = length & ~3
    for i in range(0, end4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[end4 + 2] << 16
    if rest >= 2:
        h ^= data[end4 + 1] << 8
    if rest >= 1:
        h ^= data[end4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    if partitions == 1:  # nothing to choose: skip the (pure Python) hash
        return 0
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """Round-robin over batches for records without a key (thread-safe)."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def next_partition(self, partitions: int) -> int:
        with self._lock:
            return next(self._counter) % partitions
