"""The Cluster interface: everything the console, the JSON API and the command line may ask of a
broker, in one place.

``LocalCluster`` serves it from the broker in this process (log store + group coordinator);
``streams.cluster.kafka.KafkaCluster`` serves the same methods from any Kafka-protocol cluster
(Tidelog's listener, Apache Kafka, Redpanda). The web layer only ever sees this interface,
declared as the ``Cluster`` Protocol, never a segment file. Both classes are checked against the
Protocol by the type checker (``make lint`` runs mypy), so they cannot drift apart.

Writes are services with keyword arguments (``create_topic(name=..., partitions=...)``); reads
return frozen dataclasses shaped for display. Errors are the engine's domain errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from streams.cluster.browse import BrowseRequest, BrowseResult, CommittedReader, Filter, browse
from streams.errors import (
    InternalTopic,
    InvalidRecord,
    UnknownTopic,
    Unsupported,
)
from streams.groups import (
    GroupCoordinator,
    GroupLag,
    ResetPlan,
    ResetScope,
    ResetStrategy,
    execute_plan,
    group_lag,
    plan_reset,
)
from streams.groups.coordinator import GroupDescription
from streams.log import AppendResult, LogStore, Record, TopicDescription, txn
from streams.log import records as rb
from streams.log.reader import LogReader
from streams.log.store import is_internal
from streams.txn.coordinator import TransactionCoordinator, TransactionDescription

__all__ = [
    "BrowseRequest",
    "BrowseResult",
    "Cluster",
    "ControlMarker",
    "Filter",
    "GroupDetail",
    "GroupSummary",
    "LocalCluster",
    "ProduceRequest",
    "PurgeResult",
    "TopicSummary",
    "TransactionDescription",
]

MARKER_SCAN_BYTES = 8 << 20  # what one look for transaction markers reads at most
# transactions the coordinator has not finished (Kafka's ListTransactions states filter)
OPEN_TXN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


@dataclasses.dataclass(frozen=True)
class TopicSummary:
    name: str
    internal: bool
    partitions: int
    record_count: int
    size_bytes: int
    cleanup_policy: str
    retention_ms: int
    last_append_ms: int | None
    # when its figures were taken (ms since the epoch), when not now: a large external
    # cluster's topic list reads a snapshot (``KafkaCluster.list_topics``)
    as_of_ms: int | None = None


@dataclasses.dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    members: int
    topics: tuple[str, ...]
    total_lag: int
    fallen_behind: int  # partitions whose committed offset fell below the log start


@dataclasses.dataclass(frozen=True)
class GroupDetail:
    description: GroupDescription
    lag: GroupLag
    # topics the group has committed offsets for that no longer exist (not in `lag`)
    deleted_topics: tuple[str, ...] = ()

    @property
    def idle_members(self) -> list[str]:
        return [m.member_id for m in self.description.members if not m.assignment]


@dataclasses.dataclass(frozen=True)
class ProduceRequest:
    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    partition: int | None = None
    timestamp_ms: int | None = None


@dataclasses.dataclass(frozen=True)
class ControlMarker:
    """A transaction marker (a control batch) in a partition: COMMIT or ABORT of a producer's
    transaction. Not a record: consumers never receive it, but it takes an offset."""

    partition: int
    offset: int
    timestamp_ms: int
    kind: str  # "COMMIT" or "ABORT"
    producer_id: int
    producer_epoch: int

    control = True  # tells marker rows from records in the message browser


@dataclasses.dataclass(frozen=True)
class PurgeResult:
    topic: str
    before: dict[int, int]  # partition -> log start offset before the purge
    after: dict[int, int]  # partition -> log start offset after it

    @property
    def records_deleted(self) -> int:
        return sum(self.after[p] - self.before[p] for p in self.after)


class Cluster(Protocol):
    """What the console, the JSON API, the command line and the panel jobs may ask of a broker:
    ``LocalCluster`` (in-process) and ``streams.cluster.kafka.KafkaCluster`` (any Kafka-protocol
    cluster) implement it. Keyword-only arguments are part of the contract."""

    # ------------------------------------------------------------------ topics

    def list_topics(
        self, *, include_internal: bool = False, name_filter: str = ""
    ) -> list[TopicSummary]: ...

    def describe_topic(self, name: str) -> TopicDescription: ...

    def topic_groups(self, name: str) -> list[tuple[str, str, int]]: ...

    def create_topic(
        self, *, name: str, partitions: int = 1, config: dict | None = None
    ) -> TopicDescription: ...

    def alter_topic_config(
        self, *, name: str, set_: dict | None = None, delete: Sequence[str] = ()
    ) -> TopicDescription: ...

    def add_partitions(self, *, name: str, total: int) -> TopicDescription: ...

    def delete_topic(self, *, name: str) -> None: ...

    def purge(
        self,
        *,
        topic: str,
        partitions: Sequence[int] | None = None,
        before_offset: int | None = None,
        before_timestamp_ms: int | None = None,
    ) -> PurgeResult: ...

    # ------------------------------------------------------------------ records

    def browse(self, request: BrowseRequest) -> BrowseResult: ...

    def produce(self, *, topic: str, records: Sequence[ProduceRequest]) -> list[AppendResult]: ...

    def read(
        self, *, topic: str, partition: int, offset: int, max_records: int = 100
    ) -> list[Record]: ...

    def offset_for_timestamp(
        self, *, topic: str, partition: int, timestamp_ms: int
    ) -> int | None: ...

    def partition_offsets(self, *, topic: str) -> list[tuple[int, int]]: ...

    def stable_offsets(self, *, topic: str) -> list[int]: ...

    def control_markers(
        self, *, topic: str, partition: int, start: int, last: int
    ) -> list[ControlMarker]: ...

    # ------------------------------------------------------------------ transactions

    def list_transactions(self, *, open_only: bool = True) -> list[TransactionDescription]: ...

    def abort_transaction(
        self,
        *,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        start_ms: int | None = None,
    ) -> TransactionDescription: ...

    # ------------------------------------------------------------------ groups

    def list_groups(self) -> list[GroupSummary]: ...

    def describe_group(self, group_id: str) -> GroupDetail: ...

    def plan_reset(
        self, *, group_id: str, strategy: ResetStrategy, scope: ResetScope
    ) -> ResetPlan: ...

    def execute_reset(self, *, plan: ResetPlan) -> None: ...

    def delete_group(self, *, group_id: str) -> None: ...

    def delete_group_offsets(self, *, group_id: str, topic: str) -> list[tuple[str, int]]: ...

    def is_internal(self, topic: str) -> bool: ...


class LocalCluster:
    """The Cluster interface over an in-process store and coordinator."""

    def __init__(
        self,
        store: LogStore,
        coordinator: GroupCoordinator,
        transactions: TransactionCoordinator | None = None,
    ) -> None:
        self.store = store
        self.coordinator = coordinator
        self.transactions = transactions  # None: no Kafka listener, so no transactions

    # ================================================================== topics

    def list_topics(
        self, *, include_internal: bool = False, name_filter: str = ""
    ) -> list[TopicSummary]:
        needle = name_filter.strip().lower()
        out = []
        for name in self.store.list_topics(include_internal=include_internal):
            if needle and needle not in name.lower():
                continue
            d = self.store.describe_topic(name)
            last = [p.last_append_ms for p in d.partitions if p.last_append_ms is not None]
            out.append(
                TopicSummary(
                    name=name,
                    internal=d.internal,
                    partitions=len(d.partitions),
                    record_count=d.record_count,
                    size_bytes=d.size_bytes,
                    cleanup_policy=d.config["cleanup.policy"],
                    retention_ms=int(d.config["retention.ms"]),
                    last_append_ms=max(last, default=None),
                )
            )
        return out

    def describe_topic(self, name: str) -> TopicDescription:
        return self.store.describe_topic(name)

    def topic_groups(self, name: str) -> list[tuple[str, str, int]]:
        """(group, state, lag on this topic) for every group reading the topic."""
        self.store.describe_topic(name)
        out = []
        for group_id in self.coordinator.groups_reading(name):
            lag = group_lag(self.coordinator, self.store, group_id)
            state = str(self.coordinator.group_state(group_id))
            out.append((group_id, state, lag.by_topic().get(name, 0)))
        return out

    def create_topic(
        self, *, name: str, partitions: int = 1, config: dict | None = None
    ) -> TopicDescription:
        _refuse_internal(name, "created")
        return self.store.create_topic(name, partitions, config or {})

    def alter_topic_config(
        self, *, name: str, set_: dict | None = None, delete: Sequence[str] = ()
    ) -> TopicDescription:
        _refuse_internal(name, "reconfigured")
        return self.store.alter_config(name, set_ or {}, tuple(delete))

    def add_partitions(self, *, name: str, total: int) -> TopicDescription:
        _refuse_internal(name, "given partitions")
        return self.store.add_partitions(name, total)

    def delete_topic(self, *, name: str) -> None:
        _refuse_internal(name, "deleted")
        self.store.delete_topic(name)

    def purge(
        self,
        *,
        topic: str,
        partitions: Sequence[int] | None = None,
        before_offset: int | None = None,
        before_timestamp_ms: int | None = None,
    ) -> PurgeResult:
        """Delete records (Kafka's DeleteRecords): below an offset, before a timestamp, or all
        (neither given). Compact-only topics refuse, with the reason, as Kafka does."""
        _refuse_internal(topic, "purged")
        d = self.store.describe_topic(topic)
        refuse_compacted_purge(topic, d.config["cleanup.policy"])
        chosen = range(len(d.partitions)) if partitions is None else partitions  # unknown: 404
        before, targets = purge_targets(
            self.store, topic, chosen, before_offset, before_timestamp_ms
        )
        after = self.store.delete_records(topic, targets)
        return PurgeResult(topic, before, after)

    # ================================================================== records

    def browse(self, request: BrowseRequest) -> BrowseResult:
        reader = CommittedReader(self.store) if request.committed else self.store
        return browse(reader, request)

    def produce(self, *, topic: str, records: Sequence[ProduceRequest]) -> list[AppendResult]:
        _refuse_internal(topic, "written to")
        if not records:
            raise InvalidRecord("nothing to produce")
        out = []
        for r in records:  # partitions may differ per record: one append each, in order
            out.append(
                self.store.append(topic, r.value, r.key, r.headers, r.partition, r.timestamp_ms)
            )
        return out

    def read(
        self, *, topic: str, partition: int, offset: int, max_records: int = 100
    ) -> list[Record]:
        return self.store.read(topic, partition, offset, max_records=max_records)

    def offset_for_timestamp(self, *, topic: str, partition: int, timestamp_ms: int) -> int | None:
        return self.store.offset_for_timestamp(topic, partition, timestamp_ms)

    def partition_offsets(self, *, topic: str) -> list[tuple[int, int]]:
        """(log start, high watermark) of every partition, by partition number."""
        store = self.store
        return [store.offsets(topic, p) for p in range(store.partition_count(topic))]

    def stable_offsets(self, *, topic: str) -> list[int]:
        """The last stable offset (LSO) of every partition, by partition number: the first
        offset of its oldest open transaction, else the high watermark. read_committed
        consumers read up to it."""
        store = self.store
        return [
            store.partition_log(topic, p).last_stable_offset
            for p in range(store.partition_count(topic))
        ]

    def control_markers(
        self, *, topic: str, partition: int, start: int, last: int
    ) -> list[ControlMarker]:
        """The transaction markers from `start` on, up to the first data batch past `last`
        (so the markers right after the last record shown come too). Reads raw batches, at
        most MARKER_SCAN_BYTES."""
        store = self.store
        _, end = store.offsets(topic, partition)
        out: list[ControlMarker] = []
        offset, budget = start, MARKER_SCAN_BYTES
        while offset < end and budget > 0:
            raw = store.read_batches(topic, partition, offset, min(budget, 1 << 20))
            if not raw:
                break
            budget -= len(raw)
            pos, advanced = 0, False
            while pos + rb.LOG_OVERHEAD <= len(raw):
                _, size = rb.peek_size(raw, pos)
                if pos + size > len(raw):
                    break
                h = rb.parse_header(raw, pos)
                if h.next_offset > offset:
                    if not h.is_control and h.base_offset > last:
                        return out
                    if h.is_control and h.base_offset >= start:
                        kind = txn.marker_type(raw[pos : pos + size], h)
                        if kind is not None:
                            out.append(
                                ControlMarker(
                                    partition,
                                    h.base_offset,
                                    h.max_timestamp,
                                    "COMMIT" if kind == txn.COMMIT else "ABORT",
                                    h.producer_id,
                                    h.producer_epoch,
                                )
                            )
                    offset, advanced = h.next_offset, True
                pos += size
            if not advanced:
                break
        return out

    # ================================================================== transactions

    def _txn_coordinator(self) -> TransactionCoordinator:
        if self.transactions is None:
            raise Unsupported(
                "transactions are not available: the Kafka listener is off "
                "(TIDELOG_KAFKA_LISTENER=0), and the transaction coordinator runs with it"
            )
        return self.transactions

    def list_transactions(self, *, open_only: bool = True) -> list[TransactionDescription]:
        """The coordinator's transactional ids (Kafka's ListTransactions + DescribeTransactions),
        oldest transaction first; `open_only`: only those Ongoing or being completed."""
        if self.transactions is None:
            return []
        txns = self.transactions.describe()
        if open_only:
            txns = [t for t in txns if t.state in OPEN_TXN_STATES]
        return sorted(txns, key=lambda t: (t.start_ms, t.transactional_id))

    def abort_transaction(
        self,
        *,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        start_ms: int | None = None,
    ) -> TransactionDescription:
        """Abort the ongoing transaction of `transactional_id` as the coordinator's timeout
        would: ABORT markers in its partitions, its offsets dropped, the epoch bumped (its
        producer is fenced). `producer_id`/`producer_epoch` (and `start_ms`, when given): the
        ones the operator saw; the coordinator checks them and aborts under one lock
        (``TransactionCoordinator.abort_if_current``), so a transaction that has moved on is
        refused (InvalidTxnState) and nothing is aborted. Returns the transaction as it was
        before the abort."""
        return self._txn_coordinator().abort_if_current(
            transactional_id, producer_id, producer_epoch, start_ms
        )

    # ================================================================== groups

    def list_groups(self) -> list[GroupSummary]:
        out = []
        for group_id, state in self.coordinator.list_groups():
            lag = group_lag(self.coordinator, self.store, group_id)
            desc = self.coordinator.describe_group(group_id)
            topics = sorted(set(lag.topics) | {t for m in desc.members for t in m.subscription})
            out.append(
                GroupSummary(
                    group_id,
                    state,
                    len(desc.members),
                    tuple(topics),
                    lag.total,
                    sum(1 for p in lag.partitions if p.fallen_behind_retention),
                )
            )
        return out

    def describe_group(self, group_id: str) -> GroupDetail:
        desc = self.coordinator.describe_group(group_id)
        committed = {t for t, _ in self.coordinator.committed(group_id)}
        deleted = tuple(sorted(committed - set(self.store.list_topics())))
        return GroupDetail(desc, group_lag(self.coordinator, self.store, group_id), deleted)

    def plan_reset(self, *, group_id: str, strategy: ResetStrategy, scope: ResetScope) -> ResetPlan:
        return plan_reset(self.coordinator, self.store, group_id, strategy, scope)

    def execute_reset(self, *, plan: ResetPlan) -> None:
        execute_plan(self.coordinator, plan)

    def delete_group(self, *, group_id: str) -> None:
        self.coordinator.delete_group(group_id)

    def delete_group_offsets(self, *, group_id: str, topic: str) -> list[tuple[str, int]]:
        if topic not in self.store.list_topics() and not any(
            t == topic for t, _ in self.coordinator.committed(group_id)
        ):
            raise UnknownTopic(topic)
        return self.coordinator.delete_offsets(group_id, topic)

    def is_internal(self, topic: str) -> bool:
        return is_internal(topic)


if TYPE_CHECKING:  # mypy (make lint) holds LocalCluster to the Protocol, signature by signature

    def _conforms(cluster: LocalCluster) -> Cluster:
        return cluster


def refuse_compacted_purge(topic: str, cleanup_policy: str) -> None:
    """Compact-only topics refuse purges by offset, with the reason, as Kafka does."""
    if cleanup_policy == "compact":
        raise InvalidRecord(
            f"topic {topic!r} is compacted (cleanup.policy=compact): its records are deleted "
            "by key, with tombstones (a record with the key and no value). Purging by offset "
            "would also drop the latest value of keys, so it is refused; switch the policy to "
            "compact,delete first if that is what you want"
        )


def purge_targets(
    offsets_source: LogReader,
    topic: str,
    partitions: Sequence[int],
    before_offset: int | None,
    before_timestamp_ms: int | None,
) -> tuple[dict[int, int], dict[int, int]]:
    """(log start offsets now, DeleteRecords targets) per partition: below `before_offset`
    (clamped to the partition), before `before_timestamp_ms`, or everything (neither given).
    `offsets_source`: the store, or a cluster view."""
    before, targets = {}, {}
    for p in partitions:
        start, end = offsets_source.offsets(topic, p)
        before[p] = start
        if before_offset is not None:
            targets[p] = min(max(before_offset, start), end)
        elif before_timestamp_ms is not None:
            found = offsets_source.offset_for_timestamp(topic, p, before_timestamp_ms)
            targets[p] = end if found is None else max(found, start)
        else:
            targets[p] = end
    return before, targets


def _refuse_internal(topic: str, action: str) -> None:
    if is_internal(topic):
        raise InternalTopic(topic, action)
