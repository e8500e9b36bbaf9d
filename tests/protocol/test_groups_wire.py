"""Group and committed-offset APIs driven field by field over a bare socket (``WireClient``)."""

from __future__ import annotations

from streams.protocol import codec
from tests.protocol.wire import WireClient

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
OFFSET_METADATA_TOO_LARGE = 12


def _commit(client: WireClient, group: str, topic: str, parts: list[tuple[int, int, str | None]]):
    cls = codec.request_class(OFFSET_COMMIT)[9]
    topic_cls = cls.OffsetCommitRequestTopic
    resp = client.call(
        OFFSET_COMMIT,
        9,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            topic_cls(
                name=topic,
                partitions=[
                    topic_cls.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata=m
                    )
                    for p, o, m in parts
                ],
            )
        ],
    )
    return {p.partition_index: p.error_code for p in resp.topics[0].partitions}


def _fetch_committed(client: WireClient, group: str, version: int = 8) -> dict:
    cls = codec.request_class(OFFSET_FETCH)[version]
    resp = client.call(
        OFFSET_FETCH,
        version,
        groups=[cls.OffsetFetchRequestGroup(group_id=group, topics=None)],
        require_stable=False,
    )
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata)
        for t in resp.groups[0].topics
        for p in t.partitions
    }


def test_offset_commit_stores_negative_offsets_and_refuses_only_oversized_metadata(
    broker, bootstrap
):
    """As Kafka's OffsetMetadataManager: any offset is stored (KafkaJS commits -2 for
    "earliest"), and only metadata over offset.metadata.max.bytes (4096) is refused, for that
    partition alone."""
    broker.store.create_topic("t", 4)
    with WireClient(bootstrap) as c:
        codes = _commit(
            c, "g", "t", [(0, -2, None), (1, -1, "m"), (2, 7, "x" * 4096), (3, 9, "é" * 4097)]
        )
        assert codes == {0: 0, 1: 0, 2: 0, 3: OFFSET_METADATA_TOO_LARGE}
        assert _fetch_committed(c, "g") == {
            ("t", 0): (-2, ""),
            ("t", 1): (-1, "m"),
            ("t", 2): (7, "x" * 4096),
        }
    # the console, lag and resets see no position where a sentinel is stored
    assert {tp: c.offset for tp, c in broker.coordinator.committed("g").items()} == {("t", 2): 7}


JOIN_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 11, 14, 15
# what a member sends is opaque to the coordinator: a newer or custom subscription format
# (here: a made-up version 7 with trailing bytes) must come back byte for byte
OWN_METADATA = b"\x00\x07\x00\x00\x00\x01\x00\x01t\xff\xfe\x00custom-user-data"
OTHER_METADATA = b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"
OWN_ASSIGNMENT = b"\x00\x03\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\xca\xfe"


def _describe(client: WireClient, group: str):
    resp = client.call(DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=False)
    return resp.groups[0]


def test_describe_groups_returns_the_members_own_metadata_and_assignment_bytes(broker, bootstrap):
    """DescribeGroups used to re-encode a subscription and an assignment from what Tidelog had
    decoded, which @platformatic/kafka's describeGroups could not read; Kafka returns the
    member's JoinGroup metadata for the chosen protocol and the leader's assignment as sent."""
    broker.store.create_topic("t", 1)
    join_cls = codec.request_class(JOIN_GROUP)[5]
    sync_cls = codec.request_class(SYNC_GROUP)[3]
    with WireClient(bootstrap) as c:
        joined = c.call(
            JOIN_GROUP,
            5,
            group_id="raw",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[
                join_cls.JoinGroupRequestProtocol(name="cooperative-sticky", metadata=OWN_METADATA),
                join_cls.JoinGroupRequestProtocol(name="range", metadata=OTHER_METADATA),
            ],
        )
        assert joined.error_code == 0 and joined.protocol_name == "cooperative-sticky"
        member = joined.member_id
        # completing the rebalance: no metadata and no assignment yet, as Kafka
        before = _describe(c, "raw")
        assert before.group_state == "CompletingRebalance" and before.protocol_data == ""
        assert [(m.member_metadata, m.member_assignment) for m in before.members] == [(b"", b"")]
        synced = c.call(
            SYNC_GROUP,
            3,
            group_id="raw",
            generation_id=joined.generation_id,
            member_id=member,
            group_instance_id=None,
            assignments=[
                sync_cls.SyncGroupRequestAssignment(member_id=member, assignment=OWN_ASSIGNMENT)
            ],
        )
        assert synced.error_code == 0 and bytes(synced.assignment) == OWN_ASSIGNMENT
        described = _describe(c, "raw")
    assert (described.error_code, described.group_state) == (0, "Stable")
    assert (described.protocol_type, described.protocol_data) == ("consumer", "cooperative-sticky")
    [m] = described.members
    assert (m.member_id, m.client_id) == (member, "wire-test")
    assert bytes(m.member_metadata) == OWN_METADATA
    assert bytes(m.member_assignment) == OWN_ASSIGNMENT
