"""``txncodec`` (AddOffsetsToTxn and TxnOffsetCommit written out by hand) against
kafka-python's generic codec, its reference: the same fields from every request version's
bytes, None (the generic decoder answers) for what it does not expect, and byte-identical
responses."""

from __future__ import annotations

import pytest

from streams.protocol import codec, txncodec
from streams.protocol.handlers import SUPPORTED_VERSIONS

CASES = [
    (
        txncodec.ADD_OFFSETS_TO_TXN_KEY,
        v,
        {
            "transactional_id": "copier-é1",
            "producer_id": 4_000_000_001,
            "producer_epoch": 7,
            "group_id": "copier-group",
        },
    )
    for v in range(5)
]


def _frame(key: int, version: int, client_id: str | None = "rdkafka", **fields) -> bytes:
    req = codec.request_class(key)[version](**fields)
    req.with_header(correlation_id=123_456, client_id=client_id)
    return bytes(req.encode(header=True, framed=True))[4:]


def _generic(frame: bytes, key: int, version: int):
    return codec.request_class(key)[version].decode(memoryview(frame), version=version, header=True)


@pytest.mark.parametrize(("key", "version", "fields"), CASES)
def test_requests_decode_as_the_generic_codec_decodes_them(key, version, fields):
    for client_id in ("rdkafka", None, ""):
        frame = _frame(key, version, client_id, **fields)
        got = txncodec.decode(frame)
        assert got is not None
        generic = _generic(frame, key, version)
        assert got[:3] == (version, 123_456, generic.header.client_id)
        for name, value in got[3]._asdict().items():
            assert value == getattr(generic, name) == fields[name]
        req = codec.decode_request(frame, SUPPORTED_VERSIONS)  # the listener's entry point
        assert req.body == got[3]


@pytest.mark.parametrize(("key", "version", "fields"), CASES)
def test_what_it_does_not_expect_is_left_to_the_generic_decoder(key, version, fields):
    frame = _frame(key, version, **fields)
    assert txncodec.decode(frame + b"\x00") is None  # bytes left over
    for cut in range(len(frame)):
        assert txncodec.decode(frame[:cut]) is None  # truncated
    long_id = dict(fields, transactional_id="t" * 200)  # a compact length of two bytes
    assert txncodec.decode(_frame(key, version, **long_id))[3].transactional_id == "t" * 200
    if version >= txncodec.FLEXIBLE:
        tagged = bytearray(frame)
        tagged[-1] = 1  # one tagged field in the body: not read here
        assert txncodec.decode(bytes(tagged)) is None


@pytest.mark.parametrize(("key", "version", "fields"), CASES)
def test_responses_are_byte_for_byte_the_generic_encoders(key, version, fields):
    req = codec.decode_request(_frame(key, version, **fields), SUPPORTED_VERSIONS)
    for code in (0, 47, 90):
        generic = codec.encode_response(
            req, codec.make_response(req, throttle_time_ms=0, error_code=code)
        )
        mine = txncodec.encode_add_offsets_response(version, req.correlation_id, code)
        assert mine == bytes(generic)


@pytest.mark.parametrize("version", range(5))
def test_txn_offset_commit_responses_are_the_generic_encoders(version):
    fields = {
        "transactional_id": "copier-1",
        "group_id": "copier-group",
        "producer_id": 5,
        "producer_epoch": 1,
        "topics": [],
    }
    if version >= 3:
        fields |= {"generation_id": -1, "member_id": "", "group_instance_id": None}
    req = codec.decode_request(
        _frame(txncodec.TXN_OFFSET_COMMIT_KEY, version, **fields), SUPPORTED_VERSIONS
    )
    cls = codec.response_class(txncodec.TXN_OFFSET_COMMIT_KEY).TxnOffsetCommitResponseTopic
    for topics in (
        [],
        [("in-é", [(0, 0)])],
        [("in", [(0, 0), (7, 0), (2**31 - 1, 0)]), ("x" * 300, [(3, 49)]), ("y", [])],
    ):
        generic = codec.encode_response(
            req,
            codec.make_response(
                req,
                throttle_time_ms=0,
                topics=[
                    cls(
                        name=name,
                        partitions=[
                            cls.TxnOffsetCommitResponsePartition(partition_index=p, error_code=c)
                            for p, c in parts
                        ],
                    )
                    for name, parts in topics
                ],
            ),
        )
        mine = txncodec.encode_txn_offset_commit_response(version, req.correlation_id, topics)
        assert mine == bytes(generic)


def _txn_offset_commit_fields(version: int, topics) -> dict:
    fields = {
        "transactional_id": "copier-é1",
        "group_id": "g" * 150,
        "producer_id": 4_000_000_001,
        "producer_epoch": 7,
        "topics": topics,
    }
    if version >= 3:
        fields |= {"generation_id": 12, "member_id": "member-1", "group_instance_id": None}
    return fields


@pytest.mark.parametrize("version", range(5))
def test_txn_offset_commit_requests_decode_as_the_generic_codec_decodes_them(version):
    cls = codec.request_class(txncodec.TXN_OFFSET_COMMIT_KEY)[version]
    topic = cls.TxnOffsetCommitRequestTopic
    part = topic.TxnOffsetCommitRequestPartition
    variants = [
        [],
        [topic(name="in", partitions=[part(partition_index=0, committed_offset=1000)])],
        [
            topic(
                name="x" * 300,
                partitions=[
                    part(partition_index=p, committed_offset=2**40 + p, committed_metadata=md)
                    for p, md in ((0, None), (1, ""), (5, "méta"), (2**31 - 1, "m" * 200))
                ],
            ),
            topic(name="empty", partitions=[]),
        ],
    ]
    if version >= 2:
        variants.append(
            [
                topic(
                    name="epochs",
                    partitions=[
                        part(partition_index=0, committed_offset=9, committed_leader_epoch=4)
                    ],
                )
            ]
        )
    for topics in variants:
        fields = _txn_offset_commit_fields(version, topics)
        if version >= 3:
            fields["group_instance_id"] = "instance-1" if topics else None
        frame = _frame(txncodec.TXN_OFFSET_COMMIT_KEY, version, **fields)
        got = txncodec.decode(frame)
        assert got is not None
        generic = _generic(frame, txncodec.TXN_OFFSET_COMMIT_KEY, version)
        body = got[3]
        for name in ("transactional_id", "group_id", "producer_id", "producer_epoch"):
            assert getattr(body, name) == getattr(generic, name)
        if version >= 3:
            for name in ("generation_id", "member_id", "group_instance_id"):
                assert getattr(body, name) == getattr(generic, name)
        else:
            assert (body.generation_id, body.member_id, body.group_instance_id) == (-1, "", None)
        assert [
            (
                t.name,
                [
                    (
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch if version >= 2 else -1,
                        p.committed_metadata,
                    )
                    for p in t.partitions
                ],
            )
            for t in generic.topics
        ] == [(t.name, [tuple(p) for p in t.partitions]) for t in body.topics]
        assert txncodec.decode(frame + b"\x00") is None
        for cut in range(0, len(frame), 7):
            assert txncodec.decode(frame[:cut]) is None
        assert codec.decode_request(frame, SUPPORTED_VERSIONS).body == body
