"""Consumer lag: how far each group is behind the end of each partition it reads."""

from __future__ import annotations

import dataclasses

from streams.groups.reader import GroupReader
from streams.log.reader import LogReader


@dataclasses.dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: the group never committed here
    log_start_offset: int
    end_offset: int
    member_id: str | None
    client_id: str | None
    host: str | None
    commit_timestamp_ms: int | None

    @property
    def lag(self) -> int | None:
        """end - committed; None without a commit. From below the log start it counts only
        what still exists (end - log start) — what is gone cannot be consumed."""
        if self.committed is None:
            return None
        return self.end_offset - max(self.committed, self.log_start_offset)

    @property
    def fallen_behind_retention(self) -> bool:
        """The committed offset was deleted by retention: the next read is out of range and
        auto.offset.reset decides where the group restarts."""
        return self.committed is not None and self.committed < self.log_start_offset


@dataclasses.dataclass(frozen=True)
class GroupLag:
    group_id: str
    partitions: tuple[PartitionLag, ...]

    @property
    def total(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    def by_topic(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.partitions:
            out[p.topic] = out.get(p.topic, 0) + (p.lag or 0)
        return out

    @property
    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})


def group_lag(coordinator: GroupReader, store: LogReader, group_id: str) -> GroupLag:
    """Lag for every partition the group has committed offsets for or is assigned."""
    desc = coordinator.describe_group(group_id)
    committed = coordinator.committed(group_id)
    owners: dict[tuple[str, int], tuple[str, str, str]] = {}
    for m in desc.members:
        for topic, parts in m.assignment.items():
            for p in parts:
                owners[(topic, p)] = (m.member_id, m.client_id, m.host)
    rows = []
    known = set(store.list_topics())
    for tp in sorted(set(committed) | set(owners)):
        topic, partition = tp
        if topic not in known or partition >= store.partition_count(topic):
            continue  # the topic was deleted (or shrank): its offsets are stale
        start, end = store.offsets(topic, partition)
        c = committed.get(tp)
        member_id, client_id, host = owners.get(tp, (None, None, None))
        rows.append(
            PartitionLag(
                topic,
                partition,
                c.offset if c else None,
                start,
                end,
                member_id,
                client_id,
                host,
                c.commit_timestamp_ms if c else None,
            )
        )
    return GroupLag(group_id, tuple(rows))
