"""``KafkaCluster``: the Cluster interface over any Kafka-protocol cluster (Tidelog's own
listener, Apache Kafka, Redpanda), through confluent-kafka.

It answers the same methods as ``LocalCluster`` with the same dataclasses and domain errors, so
the console and the JSON API do not know which one they talk to. The logic is streams' own:
browse (filters, cursors, merge) runs ``streams.cluster.browse.browse`` over a ``ClusterView``,
lag is ``streams.groups.lag.group_lag`` and reset plans are ``streams.groups.reset.plan_reset``
over offsets fetched from the cluster; only the I/O differs (see ``kafka_io``).

What an external cluster cannot tell is reported as unknown rather than invented: segment sizes
and counts (0), topic creation time (0), commit timestamps and group generations. Deleting one
topic's offsets from a group (OffsetDelete) goes through kafka-python's admin client, as
confluent-kafka's binding lacks that API (``KafkaClients.delete_offsets``).

Thread-safety: safe to share between threads (one instance per process, see
``brokerui.cluster``); each call builds its own views.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from streams import errors as se
from streams.cluster import (
    Cluster,
    ControlMarker,
    GroupDetail,
    GroupSummary,
    ProduceRequest,
    PurgeResult,
    TopicSummary,
    TransactionDescription,
    purge_targets,
    refuse_compacted_purge,
)
from streams.cluster.browse import BrowseRequest, BrowseResult, browse
from streams.cluster.kafka_io import (
    OFFSETS_MAX_AGE_S,
    ClusterView,
    GroupView,
    KafkaClients,
    RefreshAhead,
    domain_error,
    result,
)
from streams.groups import GroupLag, ResetPlan, ResetScope, ResetStrategy, group_lag, plan_reset
from streams.groups.coordinator import GroupDescription
from streams.log import AppendResult, Record, TopicDescription
from streams.log.config import LONG_MAX, SCHEMA, validate_topic_name
from streams.log.store import PartitionDescription, is_internal

# Kafka's topic defaults, for keys a cluster leaves out of DescribeConfigs. They are Tidelog's
# except the flush policy: Kafka leaves flushing to the OS page cache.
KAFKA_DEFAULTS = {key: default for key, (default, *_) in SCHEMA.items()}
KAFKA_DEFAULTS["flush.messages"] = str(LONG_MAX)
LISTING_SNAPSHOT_ABOVE = 1000  # partitions: a larger cluster's topic list reads a snapshot
ACTIVE_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance")
TXN_UNSUPPORTED = (
    "transactions are not available on an external cluster: the client library "
    "(confluent-kafka/librdkafka) has no ListTransactions, DescribeTransactions or "
    "WriteTxnMarkers admin API; use kafka-transactions.sh against that cluster"
)
# a topic's config as the cluster reports it, and the keys set on the topic itself
TopicConfigs = tuple[dict[str, str], set[str]]


def parse_cluster_url(url: str) -> str:
    """``kafka://host:port[,host2:port]`` -> the bootstrap list ``host:port,host2:port``."""
    parts = urlsplit(url.strip())
    if parts.scheme != "kafka" or not parts.netloc or parts.path not in ("", "/"):
        raise se.InvalidConfig("TIDELOG_CLUSTER", url, "expected kafka://host:port[,host:port]")
    servers = [s.strip() for s in parts.netloc.split(",") if s.strip()]
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise se.InvalidConfig("TIDELOG_CLUSTER", url, f"{server!r} is not host:port")
    return ",".join(servers)


class KafkaCluster:
    """The Cluster interface over a Kafka-protocol cluster at `bootstrap` (``host:port,...``)."""

    external = True  # the console hides local-only features (live metrics, segment files)

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout_s: float = 10.0,
        client_config: dict | None = None,
        listing_snapshot_above: int | None = None,  # None: LISTING_SNAPSHOT_ABOVE
    ) -> None:
        self.bootstrap = bootstrap
        self.clients = KafkaClients(bootstrap, timeout_s, client_config)
        self.timeout = timeout_s
        # a list of topics of more partitions than this reads their offsets and configs from
        # a snapshot kept at most OFFSETS_MAX_AGE_S old, not from the cluster on each call
        self.listing_snapshot_above = (
            LISTING_SNAPSHOT_ABOVE if listing_snapshot_above is None else listing_snapshot_above
        )
        self._listed_configs = RefreshAhead(
            lambda: self._configs(self._view().list_topics(True)), OFFSETS_MAX_AGE_S, "configs"
        )

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> KafkaCluster:
        return cls(parse_cluster_url(url), **kwargs)

    def close(self) -> None:
        self.clients.close()

    def _view(self) -> ClusterView:
        return ClusterView(self.clients)

    # ================================================================== topics

    def list_topics(
        self, *, include_internal: bool = False, name_filter: str = ""
    ) -> list[TopicSummary]:
        view = self._view()
        needle = name_filter.strip().lower()
        names = [n for n in view.list_topics(include_internal) if not needle or needle in n.lower()]
        tps = [(n, p) for n in names for p in range(view.partition_count(n))]
        as_of: int | None = None
        if len(tps) > self.listing_snapshot_above:
            # a large cluster's list: what a snapshot holds (one round of requests took
            # 0.4-1 s at 5,000 partitions), said as of when; what is newer, asked now
            offsets, as_of = self.clients.every_offset()
            listed, configs_as_of = self._listed_configs.get()
            as_of = min(as_of, configs_as_of)
            view.known(offsets)
            new_names = [n for n in names if n not in listed]
            pending = self._configs_asked(new_names)
            view.prefetch(tp for tp in tps if tp not in offsets)
            configs = {**listed, **self._configs_answered(pending)}
        else:
            # the configs, earliest and latest offsets asked at once: three requests in
            # flight together, not one after the other
            pending = self._configs_asked(names)
            view.prefetch(tps)
            configs = self._configs_answered(pending)
        return [self._summary(view, n, configs.get(n, ({}, set())), as_of) for n in names]

    def _summary(
        self, view: ClusterView, name: str, config: TopicConfigs, as_of: int | None
    ) -> TopicSummary:
        d = self._describe(view, name, config, {})
        return TopicSummary(
            name=name,
            internal=d.internal,
            partitions=len(d.partitions),
            record_count=d.record_count,
            size_bytes=0,
            cleanup_policy=d.config["cleanup.policy"],
            retention_ms=int(d.config["retention.ms"]),
            last_append_ms=None,
            as_of_ms=as_of,
        )

    def describe_topic(self, name: str) -> TopicDescription:
        view = self._view()
        view.partition_count(name)  # UnknownTopic first
        pending = self._configs_asked([name])  # answered while the last records are read
        tps = [(name, p) for p in range(view.partition_count(name))]
        last = view.last_timestamps(tps)
        config = self._configs_answered(pending).get(name, ({}, set()))
        return self._describe(view, name, config, last)

    def _describe(
        self, view: ClusterView, name: str, config_and_set: TopicConfigs, last: dict
    ) -> TopicDescription:
        config, overridden = config_and_set
        parts = []
        for p in range(view.partition_count(name)):
            start, end = view.offsets(name, p)
            parts.append(PartitionDescription(p, start, end, end, 0, 0, last.get((name, p))))
        overrides = {k: v for k, v in config.items() if k in overridden}
        return TopicDescription(
            name=name,
            topic_id="",
            internal=is_internal(name),
            config={**KAFKA_DEFAULTS, **config},
            overrides=overrides,
            partitions=parts,
            created_ms=0,
        )

    def _configs(self, names: Sequence[str]) -> dict[str, TopicConfigs]:
        """Per topic: its config as the cluster reports it, and the keys set on the topic."""
        return self._configs_answered(self._configs_asked(names))

    def _configs_asked(self, names: Sequence[str]) -> dict:
        """DescribeConfigs of `names` sent; its futures (answered by `_configs_answered`)."""
        if not names:
            return {}
        resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
        return self.clients.admin.describe_configs(resources, request_timeout=self.timeout)

    def _configs_answered(self, futures: dict) -> dict[str, TopicConfigs]:
        out = {}
        for resource, future in futures.items():
            try:
                entries = result(future, self.timeout + 1, topic=resource.name)
            except se.Unsupported:
                entries = {}
            values = {k: e.value for k, e in entries.items() if e.value is not None}
            dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
            out[resource.name] = (values, {k for k, e in entries.items() if e.source == dynamic})
        return out

    def topic_groups(self, name: str) -> list[tuple[str, str, int]]:
        """(group, state, lag on this topic) for every group reading the topic."""
        view = self._view()
        view.partition_count(name)
        groups = GroupView(self.clients)
        listed = groups.list_groups()
        ids = [gid for gid, _ in listed]
        groups.committed_many(ids)
        groups.describe_many(ids)
        out = []
        for gid, _ in listed:
            desc = groups.describe_group(gid)
            reads = any(t == name for t, _ in groups.committed(gid)) or any(
                name in m.assignment for m in desc.members
            )
            if reads:
                lag = group_lag(groups, view, gid)
                out.append((gid, desc.state, lag.by_topic().get(name, 0)))
        return out

    def create_topic(
        self, *, name: str, partitions: int = 1, config: dict | None = None
    ) -> TopicDescription:
        _refuse_internal(name, "created")
        validate_topic_name(name)
        config = {k: str(v) for k, v in (config or {}).items()}
        # replication factor -1: the cluster's default.replication.factor (KIP-464)
        topic = NewTopic(name, partitions, -1, config=config)
        futures = self.clients.admin.create_topics([topic], request_timeout=self.timeout)
        try:
            result(futures[name], self.timeout + 1, topic=name)
        finally:
            self.clients.forget_metadata()
        return self._await_topic(name)

    def _await_topic(self, name: str) -> TopicDescription:
        """Metadata reaches every broker shortly after CreateTopics answers: wait for it."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self.describe_topic(name)
            except (se.UnknownTopic, se.ClusterError):  # no leaders known yet, for a moment
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
                self.clients.forget_metadata()

    def alter_topic_config(
        self, *, name: str, set_: dict | None = None, delete: Sequence[str] = ()
    ) -> TopicDescription:
        _refuse_internal(name, "reconfigured")
        self._view().partition_count(name)
        ops = [
            ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET)
            for k, v in (set_ or {}).items()
        ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=ops)
        futures = self.clients.admin.incremental_alter_configs(
            [resource], request_timeout=self.timeout
        )
        try:
            for future in futures.values():
                result(future, self.timeout + 1, topic=name)
        finally:
            self._listed_configs.forget()
        return self.describe_topic(name)

    def add_partitions(self, *, name: str, total: int) -> TopicDescription:
        _refuse_internal(name, "given partitions")
        current = self._view().partition_count(name)
        if total <= current:
            raise se.InvalidPartitions(
                f"topic {name!r} has {current} partitions; Kafka only adds partitions"
            )
        futures = self.clients.admin.create_partitions(
            [NewPartitions(name, total)], request_timeout=self.timeout
        )
        try:
            result(futures[name], self.timeout + 1, topic=name)
        finally:
            self.clients.forget_metadata()
        deadline = time.monotonic() + self.timeout
        while self._view().partition_count(name) < total and time.monotonic() < deadline:
            time.sleep(0.05)
            self.clients.forget_metadata()
        return self.describe_topic(name)

    def delete_topic(self, *, name: str) -> None:
        _refuse_internal(name, "deleted")
        self._view().partition_count(name)
        futures = self.clients.admin.delete_topics([name], request_timeout=self.timeout)
        try:
            result(futures[name], self.timeout + 1, topic=name)
        finally:
            self.clients.forget_metadata()

    def purge(
        self,
        *,
        topic: str,
        partitions: Sequence[int] | None = None,
        before_offset: int | None = None,
        before_timestamp_ms: int | None = None,
    ) -> PurgeResult:
        """DeleteRecords below an offset, before a timestamp, or all (see LocalCluster)."""
        _refuse_internal(topic, "purged")
        view = self._view()
        count = view.partition_count(topic)
        config = {**KAFKA_DEFAULTS, **self._configs([topic]).get(topic, ({}, set()))[0]}
        refuse_compacted_purge(topic, config["cleanup.policy"])
        chosen = [p for p in (range(count) if partitions is None else partitions) if p < count]
        before, targets = purge_targets(view, topic, chosen, before_offset, before_timestamp_ms)
        return PurgeResult(topic, before, self._delete_records(topic, targets))

    def _delete_records(self, topic: str, targets: dict[int, int]) -> dict[int, int]:
        if not targets:
            return {}
        request = [TopicPartition(topic, p, o) for p, o in targets.items()]
        futures = self.clients.admin.delete_records(request, request_timeout=self.timeout)
        return {
            tp.partition: result(f, self.timeout + 1, topic=topic).low_watermark
            for tp, f in futures.items()
        }

    # ================================================================== records

    def browse(self, request: BrowseRequest) -> BrowseResult:
        if request.committed:
            raise se.Unsupported(
                "reading committed records only is not available on an external cluster yet: "
                "the console's reader there reads everything (read_uncommitted)"
            )
        return browse(self._view(), request)

    def produce(self, *, topic: str, records: Sequence[ProduceRequest]) -> list[AppendResult]:
        _refuse_internal(topic, "written to")
        if not records:
            raise se.InvalidRecord("nothing to produce")
        view = self._view()
        for r in records:  # refuse before sending: a client would wait for the topic to appear
            if r.partition is not None:
                view.check_partition(topic, r.partition)
            else:
                view.partition_count(topic)
        return [self._produce_one(topic, r) for r in records]

    def _produce_one(self, topic: str, r: ProduceRequest) -> AppendResult:
        producer = self.clients.producer()
        outcome: list = []
        kwargs: dict[str, Any] = {"key": r.key, "value": r.value, "headers": list(r.headers)}
        if r.partition is not None:
            kwargs["partition"] = r.partition
        if r.timestamp_ms is not None:
            kwargs["timestamp"] = r.timestamp_ms
        try:
            producer.produce(topic, on_delivery=lambda e, m: outcome.append((e, m)), **kwargs)
        except BufferError as exc:
            raise se.ClusterUnavailable(f"the producer queue is full: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - KafkaException for a record over the limit
            raise domain_error(exc, topic=topic) from None
        producer.flush(self.timeout)
        if not outcome:
            raise se.ClusterUnavailable(f"no acknowledgement within {self.timeout:g} s")
        err, msg = outcome[0]
        if err is not None:
            raise domain_error(err, topic=topic)
        return AppendResult(topic, msg.partition(), msg.offset(), msg.timestamp()[1])

    def read(
        self, *, topic: str, partition: int, offset: int, max_records: int = 100
    ) -> list[Record]:
        return self._view().read(topic, partition, offset, max_records)

    def offset_for_timestamp(self, *, topic: str, partition: int, timestamp_ms: int) -> int | None:
        return self._view().offset_for_timestamp(topic, partition, timestamp_ms)

    def partition_offsets(self, *, topic: str) -> list[tuple[int, int]]:
        """(log start, high watermark) of every partition, by partition number: one Metadata
        and two ListOffsets requests for the whole topic (what polling readers ask for)."""
        view = self._view()
        tps = [(topic, p) for p in range(view.partition_count(topic))]
        view.prefetch(tps)
        return [view.offsets(t, p) for t, p in tps]

    def stable_offsets(self, *, topic: str) -> list[int]:
        """The last stable offset of every partition: ListOffsets (latest) read_committed."""
        count = self._view().partition_count(topic)
        request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(count)}
        futures = self.clients.admin.list_offsets(
            request,
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=self.timeout,
        )
        found = {
            tp.partition: result(f, self.timeout + 1, topic=topic) for tp, f in futures.items()
        }
        return [found[p].offset for p in range(count)]

    def control_markers(
        self, *, topic: str, partition: int, start: int, last: int
    ) -> list[ControlMarker]:
        raise se.Unsupported(
            "transaction markers are not available on an external cluster: the client library "
            "(confluent-kafka/librdkafka) never hands control records to the application"
        )

    # ================================================================== transactions

    def list_transactions(self, *, open_only: bool = True) -> list[TransactionDescription]:
        raise se.Unsupported(TXN_UNSUPPORTED)

    def abort_transaction(
        self,
        *,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        start_ms: int | None = None,
    ) -> TransactionDescription:
        raise se.Unsupported(TXN_UNSUPPORTED)

    # ================================================================== groups

    def list_groups(self) -> list[GroupSummary]:
        view, groups = self._view(), GroupView(self.clients)
        listed = groups.list_groups()
        ids = [gid for gid, _ in listed]
        groups.describe_many(ids)
        groups.committed_many(ids)
        view.prefetch(tp for gid in ids for tp in groups.committed(gid) if tp[0] in view.topics())
        out = []
        for gid in ids:
            desc, lag = groups.describe_group(gid), group_lag(groups, view, gid)
            topics = sorted(set(lag.topics) | {t for m in desc.members for t in m.subscription})
            fallen = sum(1 for p in lag.partitions if p.fallen_behind_retention)
            out.append(
                GroupSummary(gid, desc.state, len(desc.members), tuple(topics), lag.total, fallen)
            )
        return out

    def describe_group(self, group_id: str) -> GroupDetail:
        groups, view = GroupView(self.clients), self._view()
        desc = self._known(groups, group_id)
        lag = group_lag(groups, view, group_id)  # fetches the topics' metadata into `view`
        committed = {t for t, _ in groups.committed(group_id)}
        return GroupDetail(desc, lag, tuple(sorted(committed - set(view.topics()))))

    def _known(self, groups: GroupView, group_id: str) -> GroupDescription:
        desc = groups.describe_group(group_id)
        if not desc.members and not groups.committed(group_id):
            # Kafka describes any id (as Dead or Empty); the console wants "no such group"
            raise se.UnknownGroup(group_id)
        return desc

    def group_lag(self, group_id: str) -> GroupLag:
        return group_lag(GroupView(self.clients), self._view(), group_id)

    def plan_reset(self, *, group_id: str, strategy: ResetStrategy, scope: ResetScope) -> ResetPlan:
        return plan_reset(GroupView(self.clients), self._view(), group_id, strategy, scope)

    def execute_reset(self, *, plan: ResetPlan) -> None:
        """Commit the plan's targets with the admin client, only if the group is Empty and its
        offsets are still those the plan was made from (as LocalCluster). Kafka itself refuses
        an admin commit while members are active: both refusals become GroupNotEmpty."""
        groups = GroupView(self.clients)
        self._refuse_active(groups, plan.group_id)
        now = {tp: c.offset for tp, c in groups.committed(plan.group_id).items()}
        changed = [
            f"{r.topic}-{r.partition}"
            for r in plan.rows
            if now.get((r.topic, r.partition)) != r.current
        ]
        if changed:
            raise se.OffsetsChanged(plan.group_id, changed)
        offsets = [TopicPartition(r.topic, r.partition, r.target) for r in plan.rows]
        if not offsets:
            return
        request = [ConsumerGroupTopicPartitions(plan.group_id, offsets)]
        futures = self.clients.admin.alter_consumer_group_offsets(
            request, request_timeout=self.timeout
        )
        try:
            answer = futures[plan.group_id].result(timeout=self.timeout + 1)
        except Exception as exc:  # noqa: BLE001 - KafkaException or a timeout
            raise self._reset_error(exc, plan.group_id) from None
        for tp in answer.topic_partitions:
            if tp.error is not None:
                raise self._reset_error(tp.error, plan.group_id)

    def _refuse_active(self, groups: GroupView, group_id: str) -> None:
        desc = groups.describe_group(group_id)
        if desc.members or desc.state in ACTIVE_STATES:
            raise se.GroupNotEmpty(group_id, desc.state, [m.member_id for m in desc.members])

    def _reset_error(self, exc: KafkaError | BaseException, group_id: str) -> se.TidelogError:
        err = exc
        if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
            err = exc.args[0]
        if isinstance(err, KafkaError) and err.code() in {
            KafkaError.UNKNOWN_MEMBER_ID,
            KafkaError.ILLEGAL_GENERATION,
            KafkaError.REBALANCE_IN_PROGRESS,
            KafkaError.NON_EMPTY_GROUP,
        }:
            desc = GroupView(self.clients).describe_group(group_id)
            return se.GroupNotEmpty(group_id, desc.state, [m.member_id for m in desc.members])
        if isinstance(exc, TimeoutError):
            return se.ClusterUnavailable(f"no answer within {self.timeout:g} s")
        return domain_error(err, group=group_id)

    def delete_group(self, *, group_id: str) -> None:
        groups = GroupView(self.clients)  # one DescribeGroups and OffsetFetch for both checks
        self._known(groups, group_id)  # UnknownGroup
        self._refuse_active(groups, group_id)
        futures = self.clients.admin.delete_consumer_groups(
            [group_id], request_timeout=self.timeout
        )
        try:
            futures[group_id].result(timeout=self.timeout + 1)
        except Exception as exc:  # noqa: BLE001 - KafkaException or a timeout
            raise self._reset_error(exc, group_id) from None

    def delete_group_offsets(self, *, group_id: str, topic: str) -> list[tuple[str, int]]:
        """OffsetDelete of the group's committed offsets for `topic`, as LocalCluster: refused
        (GroupNotEmpty) while active members subscribe to it, as Kafka's coordinator refuses
        with GROUP_SUBSCRIBED_TO_TOPIC; UnknownGroup, or UnknownTopic for a topic neither in
        the cluster nor among the group's offsets."""
        from kafka.errors import GroupSubscribedToTopicError, NoError

        groups = GroupView(self.clients)
        desc = self._known(groups, group_id)  # UnknownGroup
        doomed = sorted(tp for tp in groups.committed(group_id) if tp[0] == topic)
        if not doomed:
            if topic not in {t.name for t in self.list_topics(include_internal=True)}:
                raise se.UnknownTopic(topic)
            return []
        try:
            answer = self.clients.delete_offsets(group_id, doomed)
        except Exception as exc:  # noqa: BLE001 - kafka-python's errors, a refused connection
            raise se.ClusterUnavailable(
                f"OffsetDelete for group {group_id!r} failed: {exc}"
            ) from None
        errors = {tp: err for tp, err in answer.items() if err is not NoError}
        if any(err is GroupSubscribedToTopicError for err in errors.values()):
            raise se.GroupNotEmpty(group_id, desc.state, [m.member_id for m in desc.members])
        if errors:
            tp, err = next(iter(sorted(errors.items())))
            raise se.ClusterUnavailable(f"OffsetDelete of {tp[0]}[{tp[1]}]: {err.__name__}")
        return doomed

    def is_internal(self, topic: str) -> bool:
        return is_internal(topic)


if TYPE_CHECKING:  # mypy (make lint) holds KafkaCluster to the Protocol, signature by signature

    def _conforms(cluster: KafkaCluster) -> Cluster:
        return cluster


def _refuse_internal(topic: str, action: str) -> None:
    if is_internal(topic):
        raise se.InternalTopic(topic, action)
