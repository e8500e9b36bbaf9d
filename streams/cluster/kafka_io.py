"""The I/O half of ``KafkaCluster``: confluent-kafka clients, error mapping, and the read views
that let streams' pure logic (browse, lag, reset plans) run against a remote cluster.

- ``KafkaClients`` owns one AdminClient, one Producer and one assign-only Consumer (its
  ``group.id`` is never joined nor committed to: it only reads by assign + seek).
- ``domain_error`` turns a ``KafkaError`` into the engine's domain error with a stable code.
- ``ClusterView`` answers the store questions (``list_topics``, ``partition_count``, ``offsets``,
  ``offset_for_timestamp``, ``read``) that ``browse``, ``group_lag`` and ``plan_reset`` ask;
  ``GroupView`` answers the coordinator questions (``committed``, ``group_state``,
  ``describe_group``). Both cache what they fetched, so one view serves one console request
  with a handful of round trips; make a new view per request to see new data.

Thread-safety: AdminClient and Producer are thread-safe; the reading Consumer is used under its
own lock (assign + consume is a sequence that must not interleave). Views are per request, not
shared between threads.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from streams import errors as se
from streams.groups.coordinator import GroupDescription, MemberDescription
from streams.librdkafka import FETCH_DEFAULTS
from streams.log import Record
from streams.log.store import is_internal

STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
}
_CONNECTION_PROBLEMS = {KafkaError._AUTHENTICATION, KafkaError._SSL}
T = TypeVar("T")
METADATA_TTL_S = 2.0  # how old the topic list a page reads may be (KafkaClients.topic_partitions)
OFFSETS_MAX_AGE_S = 10.0  # how old a large cluster's topic list's offsets may be (every_offset)
_UNSUPPORTED = {
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError._UNSUPPORTED_FEATURE,
    KafkaError.INVALID_REQUEST,
}
# What the OffsetCommit of an admin (generation -1) gets while the group has members.
_GROUP_ACTIVE = {
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.NON_EMPTY_GROUP,
}


def domain_error(
    err: KafkaError | BaseException, *, topic: str | None = None, group: str | None = None
) -> se.TidelogError:
    """The domain error for a client error; unknown codes become ``ClusterError``."""
    if isinstance(err, KafkaException) and err.args and isinstance(err.args[0], KafkaError):
        err = err.args[0]
    if not isinstance(err, KafkaError):
        return se.ClusterError(f"Kafka client error: {err}")
    code, text = err.code(), err.str()
    if code in _UNREACHABLE or (code == KafkaError._NOENT and "leader" in text):
        # _NOENT "No leaders found": no broker of the partitions answers (a request made with
        # metadata still cached from before the cluster went away)
        return se.ClusterUnavailable(f"the Kafka cluster did not answer in time: {text}")
    if code in _UNSUPPORTED:
        return se.Unsupported(f"the Kafka cluster does not support this request: {text}")
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART and topic:
        return se.UnknownTopic(topic)
    if code == KafkaError.TOPIC_ALREADY_EXISTS and topic:
        return se.TopicAlreadyExists(topic)
    if code == KafkaError.TOPIC_EXCEPTION:
        return se.InvalidTopicName(text)
    if code in (KafkaError.INVALID_PARTITIONS, KafkaError.INVALID_REPLICATION_FACTOR):
        return se.InvalidPartitions(text)
    if code == KafkaError.INVALID_CONFIG:
        return se.InvalidConfig("config", "", text)
    if code in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE):
        return se.RecordTooLarge(text)
    if code == KafkaError.GROUP_ID_NOT_FOUND and group:
        return se.UnknownGroup(group)
    if code == KafkaError.POLICY_VIOLATION:
        return se.InvalidRecord(f"refused by the cluster's policy: {text}")
    return se.ClusterError(f"Kafka error {err.name()}: {text}")


def result(future, timeout: float, *, topic: str | None = None, group: str | None = None):
    """A future's value, with client errors turned into domain errors."""
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        raise domain_error(exc, topic=topic, group=group) from None
    except TimeoutError:
        raise se.ClusterUnavailable(f"the Kafka cluster did not answer in {timeout:g} s") from None


class RefreshAhead(Generic[T]):
    """A value `load` makes, never more than `max_age_s` old when `get` returns it: once it is
    half that age, `get` returns it and loads the next in a thread of its own (one load at a
    time), so callers that come steadily — a page polled, a list viewed — never wait for a
    load. A caller waits only for the first load, after `forget`, when the value is older than
    `max_age_s` (nobody asked for a while), or after a background load failed (so a failure
    is seen at once, as the caller's own error)."""

    def __init__(
        self,
        load: Callable[[], T],
        max_age_s: float,
        name: str,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._load, self.max_age_s, self.name, self._clock = load, max_age_s, name, clock
        self._lock = threading.Lock()
        self._value: tuple[float, float, T] | None = None  # (monotonic, wall ms, value)
        self._loading = False
        self._failed = False
        self._generation = 0  # `forget`s so far

    def get(self) -> tuple[T, int]:
        """(the value, when it was loaded: ms since the epoch)."""
        with self._lock:
            held, failed = self._value, self._failed
            age = None if held is None else self._clock() - held[0]
            if held is not None and not failed and age is not None and age < self.max_age_s:
                if age >= self.max_age_s / 2 and not self._loading:
                    self._loading = True
                    threading.Thread(target=self._reload, name=self.name, daemon=True).start()
                return held[2], int(held[1])
        return self._loaded()

    def forget(self) -> None:
        """The next `get` loads (a load under way when this is called is not kept: it may have
        read what was there before the change that made the caller forget)."""
        with self._lock:
            self._value = None
            self._generation += 1

    def _loaded(self) -> tuple[T, int]:
        with self._lock:
            generation = self._generation
        started, wall = self._clock(), time.time() * 1000
        value = self._load()  # its error is the caller's
        with self._lock:
            if generation == self._generation:
                self._value, self._failed = (started, wall, value), False
        return value, int(wall)

    def _reload(self) -> None:
        try:
            self._loaded()
        except Exception:  # noqa: BLE001 - the next get loads it and raises the error
            with self._lock:
                self._failed = True
        finally:
            with self._lock:
                self._loading = False


class KafkaClients:
    """One connection set per cluster: admin, producer and an assign-only reading consumer."""

    def __init__(self, bootstrap: str, timeout_s: float = 10.0, extra: dict | None = None):
        self.bootstrap = bootstrap
        self.timeout = timeout_s
        base = {
            "bootstrap.servers": bootstrap,
            "client.id": "tidelog-console",
            # idle connections closed by the cluster are normal: do not log each one
            "log.connection.close": False,
            # warnings and errors only, as Kafka's own tools log (tools-log4j: WARN): librdkafka's
            # notices (e.g. "Purging 1 unserved events from background queue" at close) are not
            # for the console's log or a command's stderr
            "log_level": 4,
            # sign-in and TLS failures reach only this callback: kept, to say why the
            # cluster does not answer (`connection_problem`)
            "error_cb": self._client_error,
            **(extra or {}),
        }
        self.base = base
        self.connection_problem: str | None = None
        self._tls_why: str | None = None  # OpenSSL's reason for a refused certificate
        self.admin = AdminClient(base)
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._lock = threading.Lock()  # creating the producer, closing
        self._read_lock = threading.Lock()  # the reader's assign + consume sequence
        self._metadata = RefreshAhead(self._load_metadata, METADATA_TTL_S, "metadata-refresh")
        self._every_offset = RefreshAhead(
            self._load_every_offset, OFFSETS_MAX_AGE_S, "offsets-refresh"
        )
        self._reading: tuple[str, int, int] | None = None  # where the assigned reader is now

    def _client_error(self, err: KafkaError) -> None:
        text = err.str()
        if err.code() in _CONNECTION_PROBLEMS or (
            err.code() == KafkaError._TRANSPORT and ("SSL" in text or "certificate" in text)
        ):
            from streams.cluster.connection import hide_secrets

            if "certificate verify failed" in text and self.connection_problem is None:
                self._tls_why = None  # asked again by `unavailable`: the reason may differ
            self.connection_problem = hide_secrets(text, self.base)

    def unavailable(self, exc: se.TidelogError) -> se.TidelogError:
        """`exc`, with the last sign-in or TLS failure when the cluster did not answer."""
        if not isinstance(exc, se.ClusterUnavailable):
            return exc
        self.admin.poll(0)  # librdkafka queues error callbacks until the handle is polled
        problem = self.connection_problem
        if problem and "certificate verify failed" in problem:
            if self._tls_why is None:  # librdkafka does not say why: a handshake of ours does
                from streams.cluster.connection import tls_refusal

                self._tls_why = tls_refusal(self.base, min(self.timeout, 5.0)) or ""
            if self._tls_why:
                problem = f"the cluster's certificate is not trusted: {self._tls_why}; {problem}"
        if problem:
            return se.ClusterUnavailable(f"{exc} ({problem})")
        return exc

    def topic_partitions(self) -> dict[str, int]:
        """topic -> partition count, from a Metadata request at most `METADATA_TTL_S` old: a
        page asks several times (a topic's partitions, each partition's checks), and on a
        cluster of 5,000 partitions each full Metadata answer took 100-280 ms over TLS; asked
        again ahead of time while pages keep coming (`RefreshAhead`). Changes made through
        this client are seen at once (`forget_metadata`); others within the TTL, as a Kafka
        client's own metadata cache lags (metadata.max.age.ms)."""
        return self._metadata.get()[0]

    def _load_metadata(self) -> dict[str, int]:
        md = self.admin.list_topics(timeout=self.timeout)  # KafkaException: the caller's
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def forget_metadata(self) -> None:
        """The next `topic_partitions` asks the cluster (after a change made here)."""
        self._metadata.forget()
        self._every_offset.forget()

    def end_offsets(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, high watermark) of each of `tps`: two ListOffsets requests (earliest,
        latest) in flight at once."""
        specs_earliest = {TopicPartition(t, p): OffsetSpec.earliest() for t, p in tps}
        specs_latest = {TopicPartition(t, p): OffsetSpec.latest() for t, p in tps}
        asked_earliest = self.admin.list_offsets(specs_earliest, request_timeout=self.timeout)
        asked_latest = self.admin.list_offsets(specs_latest, request_timeout=self.timeout)
        earliest = self.offsets_answered(asked_earliest)
        latest = self.offsets_answered(asked_latest)
        return {tp: (earliest[tp][0], latest[tp][0]) for tp in tps}

    def offsets_answered(self, futures: dict) -> dict[tuple[str, int], tuple[int, int]]:
        """(offset, timestamp) of each partition of `list_offsets` futures."""
        out = {}
        try:
            for tp, future in futures.items():
                info = result(future, self.timeout + 1, topic=tp.topic)
                out[(tp.topic, tp.partition)] = (info.offset, info.timestamp)
        except (se.ClusterUnavailable, se.UnknownTopic):
            self.forget_metadata()  # what it knew may be what failed
            raise
        return out

    def every_offset(self) -> tuple[dict[tuple[str, int], tuple[int, int]], int]:
        """The offsets of every partition of the cluster, at most `OFFSETS_MAX_AGE_S` old
        (asked again ahead of time while they are read), and when they were asked (ms since
        the epoch): what a list of every topic reads on a cluster too large to ask for each
        page (`KafkaCluster.list_topics`)."""
        return self._every_offset.get()

    def _load_every_offset(self) -> dict[tuple[str, int], tuple[int, int]]:
        try:
            partitions = self.topic_partitions()
            return self.end_offsets([(t, p) for t, n in partitions.items() for p in range(n)])
        except se.UnknownTopic:  # deleted since the metadata: asked again with new metadata
            partitions = self.topic_partitions()
            return self.end_offsets([(t, p) for t, n in partitions.items() for p in range(n)])

    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer(
                    {
                        **self.base,
                        "acks": "all",
                        "linger.ms": 0,
                        # Kafka's Java clients hash keys with murmur2: the same key lands on
                        # the same partition whichever client produced it
                        "partitioner": "murmur2_random",
                        "message.timeout.ms": int(self.timeout * 1000),
                    }
                )
            return self._producer

    def read(self, topic: str, partition: int, offset: int, limit: int, end: int) -> list[Record]:
        """Up to `limit` records of one partition from `offset`, stopping at `end`."""
        if offset >= end or limit <= 0:
            return []
        with self._read_lock:
            consumer = self._reader()
            # a read that continues the previous one keeps the assignment, and with it what
            # the client already fetched ahead (a panel's backfill, a browse's next page);
            # anything else starts a fresh assignment at `offset`
            if self._reading != (topic, partition, offset):
                consumer.assign([TopicPartition(topic, partition, offset)])
            self._reading = None
            try:
                out = self._drain(consumer, topic, partition, offset, limit, end)
            except BaseException:
                consumer.unassign()
                raise
            if out and out[-1].offset + 1 < end:
                self._reading = (topic, partition, out[-1].offset + 1)
            else:  # at `end`: nothing fetched ahead worth keeping, and an idle assignment
                consumer.unassign()  # would poll the cluster every fetch.wait.max.ms
            return out

    def _drain(self, consumer, topic, partition, offset, limit, end) -> list[Record]:
        out: list[Record] = []
        deadline = time.monotonic() + self.timeout
        while len(out) < limit and time.monotonic() < deadline:
            # no more than the offsets left before `end`: consume() returns once it has as many
            # messages as asked for, or waits its whole timeout (a page near the end of a
            # partition waited 200 ms per partition for records that could not come)
            nxt = out[-1].offset + 1 if out else offset
            for m in consumer.consume(max(1, min(limit - len(out), end - nxt)), 0.2):
                if m.topic() != topic or m.partition() != partition:
                    continue  # left over from an earlier assignment
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() < end:  # an end reached before more records came
                            continue
                        return out
                    raise domain_error(err, topic=topic)
                if m.offset() < offset or (out and m.offset() <= out[-1].offset):
                    continue
                out.append(_record(m))
            if out and out[-1].offset + 1 >= end:
                break
        return out

    def _reader(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **FETCH_DEFAULTS,  # a scan refetches soon after the queue was full
                    **self.base,
                    # required by the client, never used: the reader assigns, never subscribes
                    # or commits, so no group is ever joined or created
                    "group.id": "tidelog-console-reader",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    # the wait of the fetch in flight when a read assigns elsewhere: each
                    # new assignment waited it out (at 50 ms a topic page took 150 ms)
                    "fetch.wait.max.ms": 10,
                    # bounds what an assignment kept between reads fetches ahead
                    "queued.max.messages.kbytes": 16384,
                    "isolation.level": "read_uncommitted",
                }
            )
        return self._consumer

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict:
        """OffsetDelete (Kafka's API 47, which librdkafka's Python binding lacks) through
        kafka-python's admin client, connected with the same bootstrap servers and security
        settings (librdkafka's names translated: ``kafka_python_config``). Returns
        {(topic, partition): kafka.errors error class}, NoError where deleted."""
        from kafka import KafkaAdminClient
        from kafka import TopicPartition as KTopicPartition

        from streams.cluster.connection import hide_secrets_in_logs

        # kafka-python logs its configuration, the password in it, when the client starts
        hide_secrets_in_logs(self.base, "kafka.admin.client", "kafka.client", "kafka.conn")
        admin = KafkaAdminClient(
            **kafka_python_config(self.base), request_timeout_ms=int(self.timeout * 1000)
        )
        try:
            answer = admin.delete_group_offsets(
                group_id, [KTopicPartition(t, p) for t, p in partitions]
            )
        finally:
            admin.close()
        return {(tp.topic, tp.partition): err for tp, err in answer.items()}

    def close(self) -> None:
        with self._lock, self._read_lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
                self._reading = None
            if self._producer is not None:
                self._producer.flush(self.timeout)
                self._producer = None


# librdkafka property -> kafka-python KafkaAdminClient argument, for the settings a console or
# `consumer_groups --command-config` passes (bootstrap, client id, SASL, TLS)
_KAFKA_PYTHON_NAMES = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}
# librdkafka's own behaviour, nothing to translate
_LIBRDKAFKA_ONLY = {"log.connection.close", "log_level", "error_cb"}


def kafka_python_config(conf: dict) -> dict:
    """The kafka-python arguments for a librdkafka configuration; a setting with no
    translation is refused (ClusterUnavailable naming it) rather than silently dropped, since
    it may be the one that makes the connection work."""
    out: dict = {}
    for key, value in conf.items():
        if key in _LIBRDKAFKA_ONLY:
            continue
        if key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = str(value).lower() == "https"
            continue
        name = _KAFKA_PYTHON_NAMES.get(key)
        if name is None:
            raise se.ClusterUnavailable(
                f"the setting {key!r} has no equivalent for the OffsetDelete client"
            )
        out[name] = value.upper() if name in ("security_protocol", "sasl_mechanism") else value
    if out.get("sasl_mechanism") == "OAUTHBEARER":
        raise se.ClusterUnavailable(
            "sasl.mechanism=OAUTHBEARER: the OffsetDelete client (kafka-python) needs a token "
            "provider, which Tidelog does not configure yet; the other actions work"
        )
    if (
        out.get("security_protocol", "").startswith("SASL_SSL")
        or out.get("security_protocol") == "SSL"
    ):
        out.setdefault("ssl_check_hostname", True)
    return out


def _record(m) -> Record:
    headers = tuple((k, v) for k, v in (m.headers() or ()))
    return Record(m.offset(), m.timestamp()[1], m.key(), m.value(), headers)


# ------------------------------------------------------------------------------ read views


class ClusterView:
    """The store questions of streams' pure logic, answered from the cluster (cached)."""

    def __init__(self, clients: KafkaClients):
        self.clients = clients
        self.timeout = clients.timeout
        self._partitions: dict[str, int] | None = None
        self._offsets: dict[tuple[str, int], tuple[int, int]] = {}

    def topics(self) -> dict[str, int]:
        """topic -> partition count, from one Metadata request."""
        if self._partitions is None:
            try:
                self._partitions = self.clients.topic_partitions()
            except KafkaException as exc:
                raise self.clients.unavailable(domain_error(exc)) from None
            self.clients.connection_problem = None  # it answered
        return self._partitions

    def list_topics(self, include_internal: bool = True) -> list[str]:
        names = sorted(self.topics())
        return names if include_internal else [n for n in names if not is_internal(n)]

    def partition_count(self, topic: str) -> int:
        try:
            return self.topics()[topic]
        except KeyError:
            raise se.UnknownTopic(topic) from None

    def check_partition(self, topic: str, partition: int) -> None:
        count = self.partition_count(topic)
        if not 0 <= partition < count:
            raise se.UnknownPartition(topic, partition, count)

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start, high watermark); the whole topic is fetched on first use."""
        self.check_partition(topic, partition)
        if (topic, partition) not in self._offsets:
            self.prefetch([(topic, p) for p in range(self.partition_count(topic))])
        return self._offsets[(topic, partition)]

    def prefetch(self, tps: Iterable[tuple[str, int]]) -> None:
        """Fetch log start and end offsets of many partitions in two ListOffsets requests."""
        want = [tp for tp in set(tps) if tp not in self._offsets]
        if not want:
            return
        self._offsets.update(self.clients.end_offsets(want))

    def known(self, offsets: dict[tuple[str, int], tuple[int, int]]) -> None:
        """Take `offsets` (log start, high watermark) as this view's (a snapshot's)."""
        self._offsets.update(offsets)

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        self.check_partition(topic, partition)
        found = self._list_offsets({(topic, partition): OffsetSpec.for_timestamp(timestamp_ms)})
        offset = found[(topic, partition)][0]
        return None if offset < 0 else offset

    def last_timestamps(
        self, tps: Iterable[tuple[str, int]], limit: int = 64
    ) -> dict[tuple[str, int], int]:
        """Newest record timestamp of (at most `limit`) partitions, by reading each last record.
        (ListOffsets' max-timestamp spec would be one request, but not every Kafka-protocol
        broker has it, and one that does not may drop the connection.)"""
        out = {}
        for topic, p in list(tps)[:limit]:
            start, end = self.offsets(topic, p)
            if end > start:
                last = self.clients.read(topic, p, end - 1, 1, end)
                if last:
                    out[(topic, p)] = last[-1].timestamp_ms
        return out

    def _list_offsets(self, specs: dict) -> dict[tuple[str, int], tuple[int, int]]:
        request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
        asked = self.clients.admin.list_offsets(request, request_timeout=self.timeout)
        return self.clients.offsets_answered(asked)

    def read(self, topic: str, partition: int, offset: int, max_records: int = 500) -> list:
        start, end = self.offsets(topic, partition)
        if not start <= offset <= end:
            raise se.OffsetOutOfRange(topic, partition, offset, start, end)
        return self.clients.read(topic, partition, offset, max_records, end)


@dataclasses.dataclass(frozen=True)
class Committed:
    """A committed offset as OffsetFetch returns it (Kafka does not say when it was made)."""

    offset: int
    metadata: str
    commit_timestamp_ms: int | None = None


class GroupView:
    """The coordinator questions of streams' pure logic, answered from the cluster (cached)."""

    def __init__(self, clients: KafkaClients):
        self.clients = clients
        self.timeout = clients.timeout
        self._described: dict[str, GroupDescription] = {}
        self._committed: dict[str, dict[tuple[str, int], Committed]] = {}

    def list_groups(self) -> list[tuple[str, str]]:
        future = self.clients.admin.list_consumer_groups(request_timeout=self.timeout)
        listing = result(future, self.timeout + 1)
        if listing.errors:  # a broker that did not answer: a partial list would mislead
            raise domain_error(listing.errors[0])
        return sorted((g.group_id, STATE_NAMES.get(g.state, "Unknown")) for g in listing.valid)

    def describe_many(self, group_ids: Iterable[str]) -> None:
        ids = [g for g in group_ids if g not in self._described]
        if not ids:
            return
        futures = self.clients.admin.describe_consumer_groups(ids, request_timeout=self.timeout)
        for gid, future in futures.items():
            self._described[gid] = _description(result(future, self.timeout + 1, group=gid))

    def describe_group(self, group_id: str) -> GroupDescription:
        self.describe_many([group_id])
        return self._described[group_id]

    def group_state(self, group_id: str) -> str:
        return self.describe_group(group_id).state

    def committed_many(self, group_ids: Iterable[str]) -> None:
        ids = [g for g in group_ids if g not in self._committed]
        futures = {  # the client takes one group per request: send them all, then wait
            gid: self.clients.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(gid)], request_timeout=self.timeout
            )[gid]
            for gid in ids
        }
        for gid, future in futures.items():
            answer = result(future, self.timeout + 1, group=gid)
            self._committed[gid] = {
                (tp.topic, tp.partition): Committed(tp.offset, tp.metadata or "")
                for tp in answer.topic_partitions
                if tp.offset >= 0 and tp.error is None
            }

    def committed(self, group_id: str) -> dict[tuple[str, int], Committed]:
        self.committed_many([group_id])
        return self._committed[group_id]

    def forget(self, group_id: str) -> None:
        self._described.pop(group_id, None)
        self._committed.pop(group_id, None)


def _description(d) -> GroupDescription:
    members = []
    for m in d.members:
        assignment: dict[str, list[int]] = {}
        for tp in m.assignment.topic_partitions if m.assignment else ():
            assignment.setdefault(tp.topic, []).append(tp.partition)
        members.append(
            MemberDescription(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.host,
                assignment={t: sorted(ps) for t, ps in assignment.items()},
                # DescribeGroups carries the subscription only inside opaque member metadata;
                # the assigned topics are what the console shows
                subscription=tuple(sorted(assignment)),
            )
        )
    return GroupDescription(
        group_id=d.group_id,
        state=STATE_NAMES.get(d.state, "Unknown"),
        protocol_type="" if d.is_simple_consumer_group else "consumer",
        protocol=d.partition_assignor or None,
        generation=-1,  # not in the admin client's answer (the console hides it)
        leader_id=None,
        members=tuple(members),
        state_timestamp_ms=0,  # unknown (the console hides it)
    )
