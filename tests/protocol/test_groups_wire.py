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
