"""Topic ids (KIP-516) on the wire: Metadata carries a stable id per topic and answers lookups by
id; Produce v13, Fetch v13-16, OffsetCommit/OffsetFetch v10 and DeleteTopics v6 name topics by
id; an id no topic has (deleted, or re-created under a new id) gets UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import uuid

import pytest

from streams.log import records as rb
from streams.log.records import ProducerRecord
from streams.protocol import codec
from tests.protocol.conftest import open_broker
from tests.protocol.wire import WireClient

PRODUCE, FETCH, METADATA, OFFSET_COMMIT, OFFSET_FETCH, DELETE_TOPICS = 0, 1, 3, 8, 9, 20
UNKNOWN_TOPIC_ID = 100
M = codec.request_class(METADATA)
F = codec.request_class(FETCH)
P = codec.request_class(PRODUCE)


def address(broker) -> str:
    host, port = broker.kafka_address
    return f"{host}:{port}"


def metadata(client: WireClient, *, names=(), ids=(), version: int = 12):
    topics = [M.MetadataRequestTopic(name=n, topic_id=None) for n in names]
    topics += [M.MetadataRequestTopic(name=None, topic_id=i) for i in ids]
    resp = client.call(
        METADATA,
        version,
        topics=topics,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return [(t.error_code, t.name, t.topic_id, len(t.partitions)) for t in resp.topics]


def fetch(client: WireClient, topic_id: uuid.UUID, version: int, max_wait_ms: int = 0):
    fields = {
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            F.FetchTopic(
                topic_id=topic_id,
                partitions=[
                    F.FetchTopic.FetchPartition(
                        partition=p,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for p in (0, 1)
                ],
            )
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    if version < 15:
        fields["replica_id"] = -1
    return client.call(FETCH, version, **fields)


def test_metadata_ids_are_stable_across_restarts_answer_lookups_and_change_on_recreate(tmp_path):
    broker = open_broker(tmp_path / "data")
    try:
        broker.store.create_topic("orders", 3)
        with WireClient(address(broker)) as c:
            [(code, name, orders_id, partitions)] = metadata(c, names=["orders"])
            assert (code, name, partitions) == (0, "orders", 3)
            assert orders_id.hex == broker.store.topic_id("orders") and orders_id.int
            # every version that carries ids agrees; looked up by id alone, it has its name
            for version in (10, 11, 12, 13):
                assert metadata(c, names=["orders"], version=version)[0][2] == orders_id
            assert metadata(c, ids=[orders_id]) == [(0, "orders", orders_id, 3)]
            stranger = uuid.uuid4()
            assert metadata(c, ids=[stranger]) == [(UNKNOWN_TOPIC_ID, None, stranger, 0)]
    finally:
        broker.close()
    broker = open_broker(tmp_path / "data")
    try:
        with WireClient(address(broker)) as c:
            assert metadata(c, names=["orders"])[0][2] == orders_id  # kept across a restart
            broker.store.delete_topic("orders")
            broker.store.create_topic("orders", 1)
            [(_, _, new_id, _)] = metadata(c, names=["orders"])
            assert new_id not in (orders_id, uuid.UUID(int=0))
            assert metadata(c, ids=[orders_id]) == [(UNKNOWN_TOPIC_ID, None, orders_id, 0)]
    finally:
        broker.close()


@pytest.mark.parametrize("version", [13, 14, 15, 16])
def test_fetch_by_topic_id(broker, bootstrap, version):
    broker.store.create_topic("t", 2)
    broker.store.append_batch("t", [(b"a",), (b"b",)], partition=1)
    with WireClient(bootstrap) as c:
        [(_, _, topic_id, _)] = metadata(c, names=["t"])
        resp = fetch(c, topic_id, version)
        [topic] = resp.responses
        assert topic.topic_id == topic_id
        parts = {p.partition_index: p for p in topic.partitions}
        assert {i: (p.error_code, p.high_watermark) for i, p in parts.items()} == {
            0: (0, 0),
            1: (0, 2),
        }
        assert [r.value for r in rb.decode_records(parts[1].records)] == [b"a", b"b"]
        # an unknown id is answered without the long poll (this one would outlast the client's
        # 30 s socket time-out), so the client refreshes its metadata
        unknown = fetch(c, uuid.uuid4(), version, max_wait_ms=600_000).responses[0]
        assert [p.error_code for p in unknown.partitions] == [UNKNOWN_TOPIC_ID] * 2


def test_produce_commit_fetch_offsets_and_delete_by_topic_id(broker, bootstrap):
    broker.store.create_topic("ids", 1)
    stranger = uuid.uuid4()
    data = rb.build_batch([ProducerRecord(b"v", b"k")], now_ms=1_700_000_000_000)
    with WireClient(bootstrap) as c:
        [(_, _, topic_id, _)] = metadata(c, names=["ids"])
        resp = c.call(
            PRODUCE,
            13,
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                P.TopicProduceData(
                    topic_id=tid, partition_data=[P.TopicProduceData.PartitionProduceData(0, data)]
                )
                for tid in (topic_id, stranger)
            ],
        )
        answered = {
            t.topic_id: [(p.error_code, p.base_offset) for p in t.partition_responses]
            for t in resp.responses
        }
        assert answered == {topic_id: [(0, 0)], stranger: [(UNKNOWN_TOPIC_ID, -1)]}
        assert [r.value for r in broker.store.read("ids", 0, 0)] == [b"v"]

        oc = codec.request_class(OFFSET_COMMIT)[10]
        committed = c.call(
            OFFSET_COMMIT,
            10,
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                oc.OffsetCommitRequestTopic(
                    topic_id=tid,
                    partitions=[
                        oc.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=1, committed_metadata="m"
                        )
                    ],
                )
                for tid in (topic_id, stranger)
            ],
        )
        assert {t.topic_id: [p.error_code for p in t.partitions] for t in committed.topics} == {
            topic_id: [0],
            stranger: [UNKNOWN_TOPIC_ID],
        }
        assert broker.coordinator.committed("g")[("ids", 0)].offset == 1

        of = codec.request_class(OFFSET_FETCH)[10].OffsetFetchRequestGroup
        for topics in (
            None,
            [of.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=[0])],
        ):
            fetched = c.call(
                OFFSET_FETCH,
                10,
                groups=[of(group_id="g", member_id=None, member_epoch=-1, topics=topics)],
                require_stable=False,
            )
            [group] = fetched.groups
            assert [
                (
                    t.topic_id,
                    [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions],
                )
                for t in group.topics
            ] == [(topic_id, [(0, 1, "m")])]

        dt = codec.request_class(DELETE_TOPICS)[6]
        deleted = c.call(
            DELETE_TOPICS,
            6,
            topics=[dt.DeleteTopicState(name=None, topic_id=tid) for tid in (topic_id, stranger)],
            timeout_ms=5000,
        )
        assert [(r.name, r.topic_id, r.error_code) for r in deleted.responses] == [
            ("ids", topic_id, 0),
            (None, stranger, UNKNOWN_TOPIC_ID),
        ]
        assert "ids" not in broker.store.list_topics()
