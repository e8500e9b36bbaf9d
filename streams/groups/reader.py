"""``GroupReader``: the questions group lag and reset plans ask about a consumer group.
``GroupCoordinator`` answers them in process; ``streams.cluster.kafka_io.GroupView`` from any
Kafka-protocol cluster (DescribeGroups, OffsetFetch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from streams.groups.coordinator import GroupDescription, GroupState


class CommittedPosition(Protocol):
    """A committed offset; when it was committed, where the source knows it."""

    @property
    def offset(self) -> int: ...

    @property
    def commit_timestamp_ms(self) -> int | None: ...


class GroupReader(Protocol):
    def describe_group(self, group_id: str, /) -> GroupDescription: ...

    def group_state(self, group_id: str, /) -> GroupState | str: ...

    def committed(self, group_id: str, /) -> Mapping[tuple[str, int], CommittedPosition]: ...
