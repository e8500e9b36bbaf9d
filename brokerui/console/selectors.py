"""Read-side queries over the log store, shaped for the console's templates."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    log_start_offset: int
    end_offset: int
    size_bytes: int
    segment_count: int
    last_append: datetime | None

    @property
    def record_count(self) -> int:
        return self.end_offset - self.log_start_offset


@dataclass(frozen=True)
class TopicOverview:
    name: str
    internal: bool
    config: dict[str, str]
    partitions: list[PartitionRow]

    @property
    def record_count(self) -> int:
        return sum(p.record_count for p in self.partitions)

    @property
    def end_offset_total(self) -> int:
        return sum(p.end_offset for p in self.partitions)

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)

    @property
    def last_append(self) -> datetime | None:
        times = [p.last_append for p in self.partitions if p.last_append is not None]
        return max(times, default=None)


@dataclass(frozen=True)
class TopicsOverview:
    topics: list[TopicOverview]

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics)

    @property
    def record_count(self) -> int:
        return sum(t.record_count for t in self.topics)

    @property
    def size_bytes(self) -> int:
        return sum(t.size_bytes for t in self.topics)


def topics_overview(store) -> TopicsOverview:
    """Every non-internal topic with its partitions' offsets and sizes, sorted by name."""
    names = store.list_topics(include_internal=False)
    return TopicsOverview([_overview(store.describe_topic(name)) for name in names])


def _overview(description) -> TopicOverview:
    return TopicOverview(
        name=description.name,
        internal=description.internal,
        config=dict(description.config),
        partitions=[_row(p) for p in description.partitions],
    )


def _row(p) -> PartitionRow:
    return PartitionRow(
        partition=p.partition,
        log_start_offset=p.log_start_offset,
        end_offset=p.end_offset,
        size_bytes=p.size_bytes,
        segment_count=p.segment_count,
        last_append=_from_ms(p.last_append_ms),
    )


def _from_ms(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)
