"""``LogReader``: the read questions streams' pure logic (browse, group lag, reset plans) asks of
a log. ``LogStore`` answers them from its files; ``streams.cluster.kafka_io.ClusterView`` from any
Kafka-protocol cluster. Positional-only, so each side names its parameters as it likes."""

from __future__ import annotations

from typing import Protocol

from streams.log.records import Record


class LogReader(Protocol):
    def list_topics(self, include_internal: bool = ..., /) -> list[str]: ...

    def partition_count(self, topic: str, /) -> int: ...

    def offsets(self, topic: str, partition: int, /) -> tuple[int, int]:
        """(log start offset, high watermark)."""
        ...

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int, /) -> int | None:
        """The first offset whose timestamp is at or after `timestamp_ms`; None past the end."""
        ...

    def read(
        self, topic: str, partition: int, offset: int, /, max_records: int = ...
    ) -> list[Record]: ...
