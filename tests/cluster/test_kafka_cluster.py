"""KafkaCluster against a real Kafka-protocol server in another process (Tidelog's own listener;
``TIDELOG_TEST_KAFKA=tansu`` runs the same tests against tansu), with real confluent-kafka
consumers in groups: topics, produce and browse, lag, reset plans and their refusals."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer

from streams import errors as se
from streams.cluster import BrowseRequest, Filter, ProduceRequest
from streams.cluster.kafka import KafkaCluster, parse_cluster_url
from streams.groups import ResetScope, ResetStrategy
from tests.kafka_servers import kafka_server, record_consumer_configs
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with kafka_server(str(tmp_path_factory.mktemp("kafka"))) as s:
        yield s


@pytest.fixture(scope="module")
def cluster(server):
    c = KafkaCluster(server.bootstrap, timeout_s=15)
    yield c
    c.close()


@pytest.fixture
def topic(cluster, request) -> str:
    name = f"{request.node.name.replace('_', '-')[:60]}-{time.time_ns() % 10**9}"
    cluster.create_topic(name=name, partitions=2)
    return name


def produce(cluster, topic: str, n: int, start: int = 0) -> list:
    """Records v<i> to partition i % 2, one millisecond apart (browse merges by timestamp)."""
    base = int(time.time() * 1000) - 60_000
    records = [
        ProduceRequest(f"v{i}".encode(), key=f"k{i}".encode(), headers=(("n", b"%d" % i),),
                       partition=i % 2, timestamp_ms=base + i)
        for i in range(start, start + n)
    ]  # fmt: skip
    return cluster.produce(topic=topic, records=records)


def group_consumer(server, group: str, topic: str, n: int) -> Consumer:
    """A group member that has read and committed `n` records; still a member."""
    consumer = Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": 6000, "max.poll.interval.ms": 6000,
    })  # fmt: skip
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 60
    while seen < n:
        assert time.monotonic() < deadline, f"the group read {seen} of {n} records"
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    return consumer


# ------------------------------------------------------------------------------ url


def test_cluster_urls_name_one_or_more_brokers():
    assert parse_cluster_url("kafka://127.0.0.1:9092") == "127.0.0.1:9092"
    assert parse_cluster_url("kafka://a:9092,b:9093/") == "a:9092,b:9093"
    for bad in ("http://a:9092", "kafka://", "kafka://a", "kafka://a:x", "kafka://a:9092/t"):
        with pytest.raises(se.InvalidConfig):
            parse_cluster_url(bad)


# ------------------------------------------------------------------------------ topics


def test_topic_lifecycle(cluster, server):
    name = f"life-{time.time_ns() % 10**9}"
    created = cluster.create_topic(name=name, partitions=3, config={"retention.ms": "3600000"})
    assert [p.partition for p in created.partitions] == [0, 1, 2]
    assert [(p.log_start_offset, p.end_offset) for p in created.partitions] == [(0, 0)] * 3
    assert created.config["retention.ms"] == "3600000"
    assert "cleanup.policy" in created.config  # Kafka's defaults fill what a broker leaves out

    summary = {t.name: t for t in cluster.list_topics()}[name]
    assert (summary.partitions, summary.record_count, summary.retention_ms) == (3, 0, 3600000)
    assert cluster.list_topics(name_filter="no-such-topic-anywhere") == []
    with pytest.raises(se.TopicAlreadyExists):
        cluster.create_topic(name=name, partitions=1)
    with pytest.raises(se.InvalidTopicName):
        cluster.create_topic(name="bad name!", partitions=1)

    altered = cluster.alter_topic_config(name=name, set_={"retention.ms": "7200000"})
    assert altered.config["retention.ms"] == "7200000"

    cluster.delete_topic(name=name)
    wait_until(lambda: name not in {t.name for t in cluster.list_topics()}, "the deletion")
    with pytest.raises(se.UnknownTopic):
        cluster.describe_topic(name)


def test_internal_topics_stay_protected(cluster):
    for action in (
        lambda: cluster.create_topic(name="__mine", partitions=1),
        lambda: cluster.delete_topic(name="__consumer_offsets"),
        lambda: cluster.produce(topic="__consumer_offsets", records=[ProduceRequest(b"x")]),
        lambda: cluster.purge(topic="__consumer_offsets"),
        lambda: cluster.alter_topic_config(name="__consumer_offsets", set_={"retention.ms": 1}),
    ):
        with pytest.raises(se.InternalTopic):
            action()
    assert not [t for t in cluster.list_topics() if t.name.startswith("__")]
    assert cluster.is_internal("__consumer_offsets") and not cluster.is_internal("orders")


def test_add_partitions_and_purge(cluster, server, topic):
    if server.name == "tansu":
        pytest.skip("tansu has no CreatePartitions or DeleteRecords")
    produce(cluster, topic, 10)
    grown = cluster.add_partitions(name=topic, total=3)
    assert len(grown.partitions) == 3
    with pytest.raises(se.InvalidPartitions):
        cluster.add_partitions(name=topic, total=2)

    purged = cluster.purge(topic=topic, partitions=[0], before_offset=3)
    assert (purged.before, purged.after, purged.records_deleted) == ({0: 0}, {0: 3}, 3)
    assert cluster.describe_topic(topic).partitions[0].log_start_offset == 3
    with pytest.raises(se.OffsetOutOfRange):
        cluster.read(topic=topic, partition=0, offset=1)


# ------------------------------------------------------------------------------ records


def test_produce_reports_where_each_record_landed(cluster, topic):
    results = produce(cluster, topic, 6)
    assert [(r.partition, r.offset) for r in results] == [(i % 2, i // 2) for i in range(6)]
    d = cluster.describe_topic(topic)
    assert [(p.log_start_offset, p.end_offset) for p in d.partitions] == [(0, 3), (0, 3)]
    assert [p.last_append_ms for p in d.partitions] == [r.timestamp_ms for r in results[-2:]]

    with pytest.raises(se.UnknownTopic):
        cluster.produce(topic="no-such-topic-x", records=[ProduceRequest(b"x")])
    with pytest.raises(se.UnknownPartition):
        cluster.produce(topic=topic, records=[ProduceRequest(b"x", partition=7)])
    with pytest.raises(se.InvalidRecord):
        cluster.produce(topic=topic, records=[])


def test_browse_pages_filters_and_reads(cluster, server, topic):
    produce(cluster, topic, 10)

    first = cluster.browse(BrowseRequest(topic=topic, seek="oldest", page_size=4))
    assert [r.value for r in first.records] == [b"v0", b"v1", b"v2", b"v3"]  # by timestamp
    assert first.stopped == "page full" and first.next_cursor
    rest = cluster.browse(BrowseRequest(topic=topic, cursor=first.next_cursor, page_size=50))
    assert [r.value for r in rest.records] == [f"v{i}".encode() for i in range(4, 10)]
    assert rest.stopped == "end of data" and rest.next_cursor is None

    newest = cluster.browse(BrowseRequest(topic=topic, seek="newest", page_size=3))
    assert [r.value for r in newest.records] == [b"v9", b"v8", b"v7"]
    one = cluster.browse(BrowseRequest(topic=topic, partition=1, seek="offset", value=2))
    assert [(r.partition, r.offset, r.value) for r in one.records] == [
        (1, 2, b"v5"), (1, 3, b"v7"), (1, 4, b"v9")
    ]  # fmt: skip
    found = cluster.browse(
        BrowseRequest(topic=topic, seek="oldest", filters=(Filter("header_value", "equals", "7"),))
    )
    assert [(r.key, r.headers) for r in found.records] == [(b"k7", (("n", b"7"),))]
    with pytest.raises(se.UnknownPartition):
        cluster.browse(BrowseRequest(topic=topic, partition=5, seek="oldest"))

    recs = cluster.read(topic=topic, partition=0, offset=3, max_records=2)
    assert [(r.offset, r.value) for r in recs] == [(3, b"v6"), (4, b"v8")]
    assert cluster.read(topic=topic, partition=0, offset=5) == []  # the end: nothing yet
    with pytest.raises(se.OffsetOutOfRange):
        cluster.read(topic=topic, partition=0, offset=99)
    if server.name == "tansu":
        return  # tansu answers timestamp lookups with offset 0
    ts = recs[0].timestamp_ms
    assert cluster.offset_for_timestamp(topic=topic, partition=0, timestamp_ms=ts) == 3
    assert cluster.offset_for_timestamp(topic=topic, partition=0, timestamp_ms=ts - 1) == 3
    future = int(time.time() * 1000) + 3_600_000
    assert cluster.offset_for_timestamp(topic=topic, partition=0, timestamp_ms=future) is None


# ------------------------------------------------------------------------------ groups


def test_group_lag_and_reset_after_members_left(cluster, server, topic):
    group = f"billing-{topic}"
    produce(cluster, topic, 10)
    consumer = group_consumer(server, group, topic, 10)
    try:
        produce(cluster, topic, 4, start=10)  # 2 more per partition: lag 4
        summary = {g.group_id: g for g in cluster.list_groups()}[group]
        assert (summary.total_lag, summary.topics) == (4, (topic,))
        detail = cluster.describe_group(group)
        lag = {(p.topic, p.partition): (p.committed, p.end_offset, p.lag)
               for p in detail.lag.partitions}  # fmt: skip
        assert lag == {(topic, 0): (5, 7, 2), (topic, 1): (5, 7, 2)}
        assert (group, detail.description.state, 4) in cluster.topic_groups(topic)

        plan = cluster.plan_reset(
            group_id=group, strategy=ResetStrategy.parse("to-earliest"),
            scope=ResetScope(topic=topic),
        )  # fmt: skip
        assert [(r.partition, r.current, r.target, r.to_replay) for r in plan.rows] == [
            (0, 5, 0, 5), (1, 5, 0, 5)
        ]  # fmt: skip
        with pytest.raises(se.GroupNotEmpty) as refused:
            cluster.execute_reset(plan=plan)
        if server.name != "tansu":  # tansu's DescribeGroups lists no members
            assert detail.description.members and detail.description.state == "Stable"
            assert refused.value.members == [m.member_id for m in detail.description.members]
    finally:
        consumer.close()

    wait_until(lambda: cluster.describe_group(group).description.state == "Empty", "Empty")
    cluster.execute_reset(plan=plan)
    rows = cluster.describe_group(group).lag.partitions
    after = {p.partition: (p.committed, p.lag) for p in rows}
    assert after == {0: (0, 7), 1: (0, 7)}
    with pytest.raises(se.OffsetsChanged):  # the plan was made from offsets 5 and 5
        cluster.execute_reset(plan=plan)


class _NoPrecheck(KafkaCluster):
    """Skips KafkaCluster's own Empty check, to reach the cluster's refusal."""

    def _refuse_active(self, groups, group_id: str) -> None:
        pass


def test_the_clusters_own_refusal_of_a_reset_is_group_not_empty(server, topic):
    cluster = _NoPrecheck(server.bootstrap, timeout_s=15)
    group = f"raw-{topic}"
    produce(cluster, topic, 4)
    consumer = group_consumer(server, group, topic, 4)
    try:
        earliest = ResetStrategy.parse("to-earliest")
        plan = cluster.plan_reset(group_id=group, strategy=earliest, scope=ResetScope(topic=topic))
        with pytest.raises(se.GroupNotEmpty) as refused:
            cluster.execute_reset(plan=plan)
        if server.name != "tansu":
            assert refused.value.members  # who holds the group, from DescribeGroups
        rows = cluster.describe_group(group).lag.partitions
        assert {p.partition: p.committed for p in rows} == {0: 2, 1: 2}  # nothing changed
    finally:
        consumer.close()
        cluster.close()


def test_group_refusals(cluster):
    with pytest.raises(se.UnknownGroup):
        cluster.describe_group("no-such-group-anywhere")
    with pytest.raises(se.UnknownGroup):
        cluster.delete_group_offsets(group_id="no-such-group-anywhere", topic="t")


def test_an_unreachable_cluster_is_a_domain_error():
    quiet = {"log_level": 0}  # librdkafka would log every refused connection on stderr
    cluster = KafkaCluster(f"127.0.0.1:{_closed_port()}", timeout_s=1.5, client_config=quiet)
    try:
        with pytest.raises(se.ClusterUnavailable):
            cluster.list_topics()
    finally:
        cluster.close()


def _closed_port() -> int:
    from tests.kafka_servers import free_port

    return free_port()  # bound and released: nothing listens there


def test_reads_that_continue_keep_their_place_and_see_records_added_since(cluster, topic):
    """The reader stays assigned while reads continue where the last one ended (a backfill,
    a next page); records appended after a read reached the end are still found, and a read
    elsewhere starts afresh."""
    produce(cluster, topic, 30)  # 15 records in partition 0
    first = cluster.read(topic=topic, partition=0, offset=0, max_records=5)
    second = cluster.read(topic=topic, partition=0, offset=5, max_records=10)  # ends at the end
    assert [r.offset for r in first + second] == list(range(15))
    produce(cluster, topic, 6, start=30)  # 3 more there, after the reader saw the end
    third = cluster.read(topic=topic, partition=0, offset=15, max_records=100)
    assert [r.offset for r in third] == [15, 16, 17]
    assert [r.value for r in third] == [b"v30", b"v32", b"v34"]
    again = cluster.read(topic=topic, partition=0, offset=3, max_records=2)
    assert [r.offset for r in again] == [3, 4]
    assert [r.value for r in again] == [r.value for r in first[3:5]]


def test_the_reader_fetches_again_soon_after_its_queue_was_full(server, topic, monkeypatch):
    """librdkafka waits ``fetch.queue.backoff.ms`` (1000 by default) before it fetches a
    partition whose fetched queue was full: a scan of a large partition (a search, a
    backfill) then idled for most of every second. The console's reader starts from
    ``streams.librdkafka.FETCH_DEFAULTS``; a cluster's own client settings override it."""
    import streams.cluster.kafka_io as kafka_io

    made = record_consumer_configs(monkeypatch, kafka_io)
    for extra, want in (({}, 20), ({"fetch.queue.backoff.ms": 250}, 250)):
        cluster = KafkaCluster(server.bootstrap, timeout_s=15, client_config=extra)
        try:
            produce(cluster, topic, 4)
            assert [r.value for r in cluster.read(topic=topic, partition=1, offset=0)][:2] == [
                b"v1",
                b"v3",
            ]
        finally:
            cluster.close()
        assert [c["fetch.queue.backoff.ms"] for c in made] == [want], made
        made.clear()


def test_the_topic_list_is_shared_briefly_and_changes_made_here_show_at_once(cluster, server):
    """Metadata is asked at most every METADATA_TTL_S (a page asks several times): a topic
    another client creates shows within that; one created or deleted here, at once."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from streams.cluster.kafka_io import METADATA_TTL_S

    names = {t.name for t in cluster.list_topics()}
    mine = f"ttl-mine-{time.time_ns() % 10**9}"
    cluster.create_topic(name=mine, partitions=2)
    assert mine in {t.name for t in cluster.list_topics()}  # no wait
    assert cluster.describe_topic(mine).partitions[1].partition == 1
    theirs = f"ttl-theirs-{time.time_ns() % 10**9}"
    other = AdminClient({"bootstrap.servers": server.bootstrap})
    other.create_topics([NewTopic(theirs, 1, 1)])[theirs].result(30)
    wait_until(lambda: theirs in {t.name for t in cluster.list_topics()}, "the other's topic",
               timeout=METADATA_TTL_S + 10)  # fmt: skip
    cluster.delete_topic(name=mine)
    assert mine not in {t.name for t in cluster.list_topics()}
    assert names <= {t.name for t in cluster.list_topics()} | {mine}


def test_a_read_that_reaches_the_end_leaves_no_assignment_behind(cluster, topic):
    """A read that stopped short of the end keeps its assignment (the next page continues
    from what was fetched ahead); one that reached the end drops it, so an idle console does
    not poll the cluster every fetch.wait.max.ms, and the next read elsewhere does not wait
    behind a fetch held open for a partition nobody reads."""
    produce(cluster, topic, 8)  # 4 records in each partition
    first = cluster.read(topic=topic, partition=0, offset=0, max_records=2)
    assert [r.offset for r in first] == [0, 1]
    reader = cluster.clients._consumer
    assert [(tp.topic, tp.partition) for tp in reader.assignment()] == [(topic, 0)]
    rest = cluster.read(topic=topic, partition=0, offset=2, max_records=10)
    assert [r.value for r in rest] == [b"v4", b"v6"]
    assert reader.assignment() == []
    started = time.monotonic()
    last = cluster.read(topic=topic, partition=1, offset=3, max_records=1)
    assert [r.value for r in last] == [b"v7"]
    assert reader.assignment() == [] and time.monotonic() - started < 5


def test_a_large_clusters_topic_list_reads_a_snapshot_said_as_of_when(server, topic):
    """Above `listing_snapshot_above` partitions, a list of every topic reads offsets and
    configs from a snapshot at most OFFSETS_MAX_AGE_S old (each summary says when it was
    taken); a topic newer than the snapshot is asked for at once, and what is written shows
    within the snapshot's age."""
    from streams.cluster.kafka_io import OFFSETS_MAX_AGE_S

    large = KafkaCluster(server.bootstrap, timeout_s=15, listing_snapshot_above=0)
    small = KafkaCluster(server.bootstrap, timeout_s=15)
    try:
        produce(large, topic, 4)
        before = time.time() * 1000
        listed = {t.name: t for t in large.list_topics()}
        assert listed[topic].record_count == 4
        assert listed[topic].as_of_ms is not None and before - 1000 <= listed[topic].as_of_ms
        assert all(t.as_of_ms is None for t in small.list_topics())  # small: asked each time
        newer = f"{topic[:40]}-newer"
        large.create_topic(name=newer, partitions=3, config={"retention.ms": "3600000"})
        got = {t.name: t for t in large.list_topics()}[newer]  # not in the snapshot: asked
        assert (got.partitions, got.retention_ms) == (3, 3_600_000)
        produce(small, topic, 2, start=4)  # written by another client
        wait_until(
            lambda: {t.name: t for t in large.list_topics()}[topic].record_count == 6,
            "the snapshot to follow", timeout=OFFSETS_MAX_AGE_S + 10,
        )  # fmt: skip
        large.alter_topic_config(name=topic, set_={"retention.ms": "7200000"})  # here: at once
        assert {t.name: t for t in large.list_topics()}[topic].retention_ms == 7_200_000
    finally:
        large.close()
        small.close()
