"""The hand-written codec of the listener's hot requests (streams/protocol/fastcodec.py:
Produce, AddPartitionsToTxn, EndTxn, AddOffsetsToTxn, TxnOffsetCommit) against kafka-python's
generic codec, its reference: the same fields decoded from any request of every version served
(or None, and the generic decoder answers), damaged frames included, and the same response
bytes for any results. Every request goes through the same tests, parametrised by `APIS`."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.protocol import codec, fastcodec
from streams.protocol.handlers import SUPPORTED_VERSIONS
from streams.protocol.handlers.produce import PartitionResult

names = st.one_of(st.text(min_size=1, max_size=12), st.text(min_size=128, max_size=140))
client_ids = st.one_of(st.none(), st.text(max_size=10))
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)

# the nested structs of each decoded body: field -> the fast codec's struct of its items
NESTED: dict[type, dict[str, type]] = {
    fastcodec.ProduceBody: {"topic_data": fastcodec.TopicData},
    fastcodec.TopicData: {"partition_data": fastcodec.PartitionData},
    fastcodec.AddPartitionsBody: {"v3_and_below_topics": fastcodec.TxnTopic},
    fastcodec.TxnOffsetCommitBody: {"topics": fastcodec.TxnOffsetCommitTopic},
    fastcodec.TxnOffsetCommitTopic: {"partitions": fastcodec.TxnOffsetCommitPartition},
}


def view(body: Any, struct: type) -> tuple:
    """The fields of `struct` read from `body` (a fast NamedTuple or a kafka-python message),
    nested structs likewise, bytes-likes as bytes."""
    nested = NESTED.get(struct, {})
    out = []
    for name in struct._fields:  # type: ignore[attr-defined]
        value = getattr(body, name)
        if name in nested:
            value = [view(item, nested[name]) for item in value]
        elif isinstance(value, memoryview | bytearray):
            value = bytes(value)
        out.append(value)
    return tuple(out)


def encode(body: Any, draw) -> bytes:
    """A kafka-python request message as a frame (header, no size prefix)."""
    body.with_header(correlation_id=draw(int32), client_id=draw(client_ids))
    return bytes(body.encode(header=True, framed=False))


# ---------------------------------------------------------------------- request strategies


def produce_body(draw, version: int):
    cls = codec.request_class(fastcodec.PRODUCE_KEY)[version]
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = [
            cls.TopicProduceData.PartitionProduceData(
                index=draw(int32), records=draw(st.one_of(st.none(), st.binary(max_size=300)))
            )
            for _ in range(draw(st.integers(0, 3)))
        ]
        if version >= fastcodec.BY_ID:
            topic = cls.TopicProduceData(topic_id=draw(st.uuids()), partition_data=parts)
        else:
            topic = cls.TopicProduceData(name=draw(names), partition_data=parts)
        topics.append(topic)
    return cls(
        transactional_id=draw(st.one_of(st.none(), names)),
        acks=draw(int16),
        timeout_ms=draw(int32),
        topic_data=topics,
    )


def add_partitions_body(draw, version: int):
    cls = codec.request_class(fastcodec.ADD_PARTITIONS_KEY)[version]
    topics = [
        cls.AddPartitionsToTxnTopic(name=draw(names), partitions=draw(st.lists(int32, max_size=4)))
        for _ in range(draw(st.integers(0, 3)))
    ]
    return cls(
        v3_and_below_transactional_id=draw(names),
        v3_and_below_producer_id=draw(int64),
        v3_and_below_producer_epoch=draw(int16),
        v3_and_below_topics=topics,
    )


def end_txn_body(draw, version: int):
    return codec.request_class(fastcodec.END_TXN_KEY)[version](
        transactional_id=draw(names),
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        committed=draw(st.booleans()),
    )


def add_offsets_body(draw, version: int):
    return codec.request_class(fastcodec.ADD_OFFSETS_TO_TXN_KEY)[version](
        transactional_id=draw(names),
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        group_id=draw(names),
    )


def txn_offset_commit_body(draw, version: int):
    cls = codec.request_class(fastcodec.TXN_OFFSET_COMMIT_KEY)[version]
    topic_cls = cls.TxnOffsetCommitRequestTopic
    part_cls = topic_cls.TxnOffsetCommitRequestPartition
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = []
        for _ in range(draw(st.integers(0, 3))):
            fields = {
                "partition_index": draw(int32),
                "committed_offset": draw(int64),
                "committed_metadata": draw(st.one_of(st.none(), st.text(max_size=20))),
            }
            if version >= 2:
                fields["committed_leader_epoch"] = draw(int32)
            parts.append(part_cls(**fields))
        topics.append(topic_cls(name=draw(names), partitions=parts))
    fields = {
        "transactional_id": draw(names),
        "group_id": draw(names),
        "producer_id": draw(int64),
        "producer_epoch": draw(int16),
        "topics": topics,
    }
    if version >= 3:
        fields |= {
            "generation_id": draw(int32),
            "member_id": draw(st.text(max_size=12)),
            "group_instance_id": draw(st.one_of(st.none(), names)),
        }
    return cls(**fields)


class Api(NamedTuple):
    key: int
    versions: range
    flexible: int  # the first flexible version
    decode: Any  # the fast decoder
    body: type  # its body's NamedTuple
    request: Any  # (draw, version) -> a kafka-python request message

    def __repr__(self) -> str:
        return self.body.__name__


APIS = [
    Api(
        fastcodec.PRODUCE_KEY,
        range(fastcodec.MIN_VERSION, fastcodec.MAX_VERSION + 1),
        fastcodec.FLEXIBLE,
        fastcodec.decode_produce,
        fastcodec.ProduceBody,
        produce_body,
    ),
    Api(
        fastcodec.ADD_PARTITIONS_KEY,
        range(fastcodec.ADD_PARTITIONS_MAX_VERSION + 1),
        fastcodec.ADD_PARTITIONS_FLEXIBLE,
        fastcodec.decode_add_partitions,
        fastcodec.AddPartitionsBody,
        add_partitions_body,
    ),
    Api(
        fastcodec.END_TXN_KEY,
        range(fastcodec.END_TXN_MAX_VERSION + 1),
        fastcodec.END_TXN_FLEXIBLE,
        fastcodec.decode_end_txn,
        fastcodec.EndTxnBody,
        end_txn_body,
    ),
    Api(
        fastcodec.ADD_OFFSETS_TO_TXN_KEY,
        range(fastcodec.ADD_OFFSETS_MAX_VERSION + 1),
        fastcodec.ADD_OFFSETS_FLEXIBLE,
        fastcodec.decode_add_offsets,
        fastcodec.AddOffsetsToTxnBody,
        add_offsets_body,
    ),
    Api(
        fastcodec.TXN_OFFSET_COMMIT_KEY,
        range(fastcodec.TXN_OFFSET_COMMIT_MAX_VERSION + 1),
        fastcodec.TXN_OFFSET_COMMIT_FLEXIBLE,
        fastcodec.decode_txn_offset_commit,
        fastcodec.TxnOffsetCommitBody,
        txn_offset_commit_body,
    ),
]
by_api = pytest.mark.parametrize("api", APIS, ids=repr)


def request_frame(api: Api, data, version: int | None = None) -> bytes:
    if version is None:
        version = data.draw(st.sampled_from(api.versions))
    return encode(api.request(data.draw, version), data.draw)


def fields(api: Api, version, correlation_id, client_id, body) -> tuple:
    """What the listener may read of a decoded request (fast or generic)."""
    return (version, correlation_id, client_id, view(body, api.body))


def generic_fields(api: Api, frame: bytes) -> tuple:
    """What the generic decoder reads; ValueError if that has a null Kafka's schema forbids
    (which ``decode_request`` refuses)."""
    _, version, _ = codec.peek_header(frame)
    body = codec.REQUEST_CLASSES[api.key].decode(memoryview(frame), version=version, header=True)
    null = codec.first_forbidden_null(body, api.key, version)
    if null is not None:
        raise ValueError(f"{null} is null")
    return fields(api, body.version, body.header.correlation_id, body.header.client_id, body)


def test_every_fast_decoder_is_the_listeners():
    assert {api.key: api.decode for api in APIS} == fastcodec.DECODERS
    for api in APIS:
        assert SUPPORTED_VERSIONS[api.key][1] <= api.versions[-1]


# ---------------------------------------------------------------------- requests


@by_api
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_requests_decode_as_the_generic_decoder_decodes_them(api, data):
    frame = request_frame(api, data)
    fast = api.decode(frame)
    assert fast is not None
    assert type(fast[3]) is api.body
    assert fields(api, *fast) == generic_fields(api, frame)
    req = codec.decode_request(frame, SUPPORTED_VERSIONS)  # the listener's entry point
    assert type(req.body) is api.body
    assert fields(api, req.api_version, req.correlation_id, req.client_id, req.body) == fields(
        api, *fast
    )


@by_api
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_damaged_requests_decode_alike_or_go_to_the_generic_decoder(api, data):
    """Cut short, padded or with a byte changed: the fast decoder either reads what the generic
    one reads or gives the frame up (None), and `decode_request` then answers as the generic
    decoder does (its fields, or ProtocolError)."""
    frame = request_frame(api, data)
    damaged = bytearray(frame)
    how = data.draw(st.sampled_from(["cut", "pad", "flip"]))
    if how == "cut":
        damaged = damaged[: data.draw(st.integers(8, max(8, len(frame) - 1)))]
    elif how == "pad":
        damaged += data.draw(st.binary(min_size=1, max_size=4))
    else:
        at = data.draw(st.integers(8, len(frame) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
    damaged = bytes(damaged)
    try:
        expected = generic_fields(api, damaged)
    except Exception:  # noqa: BLE001 - the generic decoder refuses it
        expected = None
    fast = api.decode(damaged)
    if fast is not None:
        assert fields(api, *fast) == expected
    try:
        req = codec.decode_request(damaged, SUPPORTED_VERSIONS)
    except codec.ProtocolError:
        assert expected is None
    else:
        assert fields(api, req.api_version, req.correlation_id, req.client_id, req.body) == (
            expected
        )


@by_api
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_truncated_or_padded_frames_are_left_to_the_generic_decoder(api, data):
    frame = request_frame(api, data)
    assert api.decode(frame + b"\x00") is None  # bytes left over
    for cut in range(len(frame)):
        assert api.decode(frame[:cut]) is None


@by_api
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_tagged_fields_go_to_the_generic_decoder(api, data):
    version = data.draw(st.sampled_from(range(api.flexible, api.versions[-1] + 1)))
    frame = request_frame(api, data, version)
    assert frame.endswith(b"\x00") and api.decode(frame) is not None
    tagged = frame[:-1] + b"\x01\x05\x01\x00"  # one unknown tagged field (tag 5, 1 byte)
    assert api.decode(tagged) is None
    req = codec.decode_request(tagged, SUPPORTED_VERSIONS)
    assert type(req.body) is not api.body  # the generic decoder answered


@pytest.mark.parametrize("version", APIS[0].versions)
def test_a_librdkafka_sized_request_round_trips(version):
    """One partition, a 110 kB record set, as the benchmark's producer sends."""
    cls = codec.request_class(fastcodec.PRODUCE_KEY)[version]
    records = bytes(range(256)) * 430
    topic = (
        cls.TopicProduceData(topic_id=uuid.uuid4(), partition_data=[])
        if version >= fastcodec.BY_ID
        else cls.TopicProduceData(name="txn-abc", partition_data=[])
    )
    topic.partition_data = [cls.TopicProduceData.PartitionProduceData(index=0, records=records)]
    body = cls(transactional_id="bench-1", acks=-1, timeout_ms=30000, topic_data=[topic])
    body.with_header(correlation_id=6, client_id="rdkafka")
    frame = bytes(body.encode(header=True, framed=False))
    fast = fastcodec.decode_produce(frame)
    assert fast is not None and fields(APIS[0], *fast) == generic_fields(APIS[0], frame)


# ---------------------------------------------------------------------- responses


def produce_generic(version: int, results) -> dict:
    """The response as the Produce handler built it before fastcodec (the reference)."""
    topic_cls = codec.response_class(fastcodec.PRODUCE_KEY).TopicProduceResponse
    part_cls = topic_cls.PartitionProduceResponse
    responses = [
        topic_cls(
            name=name,
            topic_id=topic_id,
            partition_responses=[
                part_cls(
                    index=r.index,
                    error_code=r.error,
                    base_offset=r.base_offset,
                    log_append_time_ms=r.timestamp,
                    log_start_offset=r.log_start,
                    record_errors=[],
                    error_message=r.message,
                )
                for r in parts
            ],
        )
        for name, topic_id, parts in results
    ]
    return {"responses": responses}


def partition_errors_generic(key: int, field: str, topic: str, partition: str, code: str):
    """The generic fields of a response of topics of (partition, error code) results
    (AddPartitionsToTxn's, TxnOffsetCommit's), as their handlers built them before fastcodec."""
    topic_cls = getattr(codec.response_class(key), topic)
    part_cls = getattr(topic_cls, partition)

    def build(version: int, results) -> dict:
        topics = [
            topic_cls(
                name=name,
                **{field[1]: [part_cls(partition_index=p, **{code: c}) for p, c in parts]},
            )
            for name, parts in results
        ]
        return {field[0]: topics}

    return build


produce_results = st.lists(
    st.tuples(
        names,
        st.uuids(),  # answered by id from v13: the handler always has one
        st.lists(
            st.builds(
                PartitionResult,
                int32,
                int16,
                int64,
                int64,
                int64,
                st.one_of(st.none(), st.text(max_size=40)),
            ),
            max_size=4,
        ),
    ),
    max_size=3,
)
partition_errors = st.lists(
    st.tuples(names, st.lists(st.tuples(int32, int16), max_size=4)), max_size=3
)


class Response(NamedTuple):
    api: Api
    encode: Any  # the fast encoder: (correlation id, version, *args)
    args: Any  # a strategy of its args after the version
    generic: Any  # (version, *args) -> the generic response's fields but throttle

    def __repr__(self) -> str:
        return repr(self.api)


RESPONSES = [
    Response(
        APIS[0],
        fastcodec.encode_produce_response,
        st.tuples(produce_results),
        produce_generic,
    ),
    Response(
        APIS[1],
        fastcodec.encode_add_partitions_response,
        st.tuples(partition_errors),
        partition_errors_generic(
            fastcodec.ADD_PARTITIONS_KEY,
            ("results_by_topic_v3_and_below", "results_by_partition"),
            "AddPartitionsToTxnTopicResult",
            "AddPartitionsToTxnPartitionResult",
            "partition_error_code",
        ),
    ),
    Response(
        APIS[2],
        fastcodec.encode_end_txn_response,
        st.tuples(int16, int64, int16),
        lambda version, code, pid, epoch: {
            "error_code": code,
            "producer_id": pid,
            "producer_epoch": epoch,
        },
    ),
    Response(
        APIS[3],
        fastcodec.encode_add_offsets_response,
        st.tuples(int16),
        lambda version, code: {"error_code": code},
    ),
    Response(
        APIS[4],
        fastcodec.encode_txn_offset_commit_response,
        st.tuples(partition_errors),
        partition_errors_generic(
            fastcodec.TXN_OFFSET_COMMIT_KEY,
            ("topics", "partitions"),
            "TxnOffsetCommitResponseTopic",
            "TxnOffsetCommitResponsePartition",
            "error_code",
        ),
    ),
]


@pytest.mark.parametrize("response", RESPONSES, ids=repr)
@settings(max_examples=200, deadline=None)
@given(data=st.data(), correlation_id=int32)
def test_responses_encode_as_the_generic_encoder_encodes_them(response, data, correlation_id):
    version = data.draw(st.sampled_from(response.api.versions))
    args = data.draw(response.args)
    fast = response.encode(correlation_id, version, *args)
    req = codec.Request(response.api.key, version, correlation_id, None, None)
    body = codec.make_response(req, throttle_time_ms=0, **response.generic(version, *args))
    assert bytes(fast) == bytes(codec.encode_response(req, body))
    assert codec.encode_response(req, fast) is fast  # framed already: passed through
