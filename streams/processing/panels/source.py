"""Where panel jobs read records from: the ``RecordSource`` protocol and ``ClusterSource``.

A ``LogStore`` is a ``RecordSource`` as it is (the built-in broker's jobs read segments
directly, no adapter, no copies). ``ClusterSource`` adapts any Cluster (``LocalCluster`` or
``streams.cluster.kafka.KafkaCluster``) through its public methods, so the same jobs run
against an external Kafka-protocol cluster.

On a remote cluster every offsets question is a request, and a job asks for the offsets of
every partition on every poll; ``ClusterSource`` therefore fetches a topic's (start, end)
offsets in one batch (``Cluster.partition_offsets``) and reuses them for ``max_age_ms``. A
cached end offset is only ever a lower bound of the real one (ends grow), so a stale cache only
delays reading to the next poll; it never skips a record. A start offset that moved (retention)
shows up as ``OffsetOutOfRange`` from the cluster's ``read``, which jobs handle.

Thread-safety: ``ClusterSource`` may be shared between threads (its cache has a lock); the
cluster it wraps must be thread-safe (both Cluster implementations are).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from streams.errors import UnknownPartition

if TYPE_CHECKING:
    from streams.cluster import Cluster


class RecordLike(Protocol):
    """What a job reads of a record."""

    @property
    def offset(self) -> int: ...

    @property
    def timestamp_ms(self) -> int: ...

    @property
    def value(self) -> bytes | None: ...


class RecordSource(Protocol):
    """The reads a panel job needs (``LogStore`` has them, positional as here)."""

    def partition_count(self, topic: str) -> int: ...

    def offsets(self, topic: str, partition: int) -> tuple[int, int]: ...

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None: ...

    def read(
        self, topic: str, partition: int, offset: int, max_records: int = ...
    ) -> Sequence[RecordLike]: ...


class ClusterSource:
    """A ``RecordSource`` over a Cluster's keyword-argument methods (``partition_offsets``,
    ``offset_for_timestamp``, ``read``), with a topic's offsets cached for ``max_age_ms``."""

    def __init__(self, cluster: Cluster, *, max_age_ms: int = 100) -> None:
        self.cluster = cluster
        self.max_age_s = max_age_ms / 1000
        self._cache: dict[str, tuple[float, list[tuple[int, int]]]] = {}
        self._lock = threading.Lock()

    def _offsets(self, topic: str) -> list[tuple[int, int]]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(topic)
        if hit is not None and now - hit[0] <= self.max_age_s:
            return hit[1]
        offsets = self.cluster.partition_offsets(topic=topic)  # UnknownTopic once it is gone
        with self._lock:
            self._cache[topic] = (now, offsets)
        return offsets

    def partition_count(self, topic: str) -> int:
        return len(self._offsets(topic))

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        offsets = self._offsets(topic)
        if not 0 <= partition < len(offsets):
            raise UnknownPartition(topic, partition, len(offsets))
        return offsets[partition]

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        return self.cluster.offset_for_timestamp(
            topic=topic, partition=partition, timestamp_ms=timestamp_ms
        )

    def read(
        self, topic: str, partition: int, offset: int, max_records: int = 500
    ) -> Sequence[RecordLike]:
        # a job asks once more after each batch until it gets nothing: at the cached end that
        # answer is known without a round trip (the next poll refreshes the end)
        if offset == self.offsets(topic, partition)[1]:
            return []
        return self.cluster.read(
            topic=topic, partition=partition, offset=offset, max_records=max_records
        )
