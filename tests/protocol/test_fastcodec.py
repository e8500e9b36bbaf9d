"""The hand-written codec of Produce and AddPartitionsToTxn (streams/protocol/fastcodec.py)
against kafka-python's generic codec, its reference: the same fields decoded from any request
of every version served (or None, and the generic decoder answers), and the same response bytes
for any results."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.protocol import codec, fastcodec
from streams.protocol.handlers.produce import PartitionResult

VERSIONS = range(fastcodec.MIN_VERSION, fastcodec.MAX_VERSION + 1)
ProduceRequest = codec.request_class(0)
ProduceResponse = codec.response_class(0)

names = st.text(min_size=1, max_size=12)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


def generic_decode(frame: bytes):
    api_key, version, _ = codec.peek_header(frame)
    return codec.REQUEST_CLASSES[api_key].decode(memoryview(frame), version=version, header=True)


def generic_response(correlation_id: int, version: int, results) -> bytes:
    """The response as the Produce handler built it before fastcodec (the reference)."""
    cls = ProduceResponse
    topic_cls = cls.TopicProduceResponse
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
    req = codec.Request(0, version, correlation_id, None, None)
    body = codec.make_response(req, responses=responses, throttle_time_ms=0)
    return bytes(codec.encode_response(req, body))


@st.composite
def requests(draw, version=None):
    version = draw(st.sampled_from(VERSIONS)) if version is None else version
    cls = ProduceRequest[version]
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
    body = cls(
        transactional_id=draw(st.one_of(st.none(), names)),
        acks=draw(int16),
        timeout_ms=draw(int32),
        topic_data=topics,
    )
    body.with_header(
        correlation_id=draw(int32), client_id=draw(st.one_of(st.none(), st.text(max_size=10)))
    )
    return bytes(body.encode(header=True, framed=False))


def fields(version, correlation_id, client_id, body):
    """What the listener reads of a decoded Produce request."""
    return (
        version,
        correlation_id,
        client_id,
        body.transactional_id,
        body.acks,
        body.timeout_ms,
        [
            (
                t.name if version < fastcodec.BY_ID else "",
                t.topic_id if version >= fastcodec.BY_ID else None,
                [
                    (p.index, None if p.records is None else bytes(p.records))
                    for p in t.partition_data
                ],
            )
            for t in body.topic_data
        ],
    )


def generic_fields(frame: bytes):
    body = generic_decode(frame)
    return fields(body.version, body.header.correlation_id, body.header.client_id, body)


@settings(max_examples=300, deadline=None)
@given(frame=requests())
def test_requests_decode_as_the_generic_decoder_decodes_them(frame):
    fast = fastcodec.decode_produce(frame)
    assert fast is not None
    assert fields(*fast) == generic_fields(frame)
    req = codec.decode_request(frame, {0: (3, 13)})  # the listener's entry point takes it
    assert type(req.body) is fastcodec.ProduceBody
    assert (
        fields(req.api_version, req.correlation_id, req.client_id, req.body)
        == fast[:3] + (fields(*fast)[3:])
    )


@settings(max_examples=500, deadline=None)
@given(frame=requests(), data=st.data())
def test_damaged_requests_decode_alike_or_go_to_the_generic_decoder(frame, data):
    """Cut short, padded or with a byte changed: the fast decoder either reads what the generic
    one reads or gives the frame up (None), and `decode_request` then answers as the generic
    decoder does (its fields, or ProtocolError)."""
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
        expected = generic_fields(damaged)
    except Exception:  # noqa: BLE001 - the generic decoder refuses it
        expected = None
    fast = fastcodec.decode_produce(damaged)
    if fast is not None:
        assert fields(*fast) == expected
    try:
        req = codec.decode_request(damaged, {0: (3, 13)})
    except codec.ProtocolError:
        assert expected is None
    else:
        assert fields(req.api_version, req.correlation_id, req.client_id, req.body) == expected


def test_tagged_fields_go_to_the_generic_decoder():
    cls = ProduceRequest[9]
    body = cls(transactional_id=None, acks=1, timeout_ms=5, topic_data=[])
    body.with_header(correlation_id=3, client_id="c")
    frame = bytes(body.encode(header=True, framed=False))
    assert frame.endswith(b"\x00")
    tagged = frame[:-1] + b"\x01\x05\x01\x00"  # one unknown tagged field (tag 5, 1 byte)
    assert fastcodec.decode_produce(tagged) is None
    assert fastcodec.decode_produce(frame) is not None


results_strategy = st.lists(
    st.tuples(
        names,
        st.one_of(st.none(), st.uuids()),
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


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), correlation_id=int32, results=results_strategy)
def test_responses_encode_as_the_generic_encoder_encodes_them(version, correlation_id, results):
    if version >= fastcodec.BY_ID:  # answered by id: the handler always has one
        results = [(n, t or uuid.uuid4(), p) for n, t, p in results]
    fast = fastcodec.encode_produce_response(correlation_id, version, results)
    assert bytes(fast) == generic_response(correlation_id, version, results)
    req = codec.Request(0, version, correlation_id, None, None)
    assert codec.encode_response(req, fast) is fast  # framed already: passed through


@pytest.mark.parametrize("version", VERSIONS)
def test_a_librdkafka_sized_request_round_trips(version):
    """One partition, a 110 kB record set, as the benchmark's producer sends."""
    cls = ProduceRequest[version]
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
    assert fast is not None and fields(*fast) == generic_fields(frame)


# ---------------------------------------------------------------------- AddPartitionsToTxn

AddPartitions = codec.request_class(24)
ADD_VERSIONS = range(0, fastcodec.ADD_PARTITIONS_MAX_VERSION + 1)


@st.composite
def add_partitions_requests(draw):
    version = draw(st.sampled_from(ADD_VERSIONS))
    cls = AddPartitions[version]
    topics = [
        cls.AddPartitionsToTxnTopic(name=draw(names), partitions=draw(st.lists(int32, max_size=4)))
        for _ in range(draw(st.integers(0, 3)))
    ]
    body = cls(
        v3_and_below_transactional_id=draw(names),
        v3_and_below_producer_id=draw(int64),
        v3_and_below_producer_epoch=draw(int16),
        v3_and_below_topics=topics,
    )
    body.with_header(
        correlation_id=draw(int32), client_id=draw(st.one_of(st.none(), st.text(max_size=10)))
    )
    return bytes(body.encode(header=True, framed=False))


def add_fields(version, correlation_id, client_id, body):
    return (
        version,
        correlation_id,
        client_id,
        body.v3_and_below_transactional_id,
        body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch,
        [(t.name, list(t.partitions)) for t in body.v3_and_below_topics],
    )


def generic_add_fields(frame: bytes):
    body = generic_decode(frame)
    return add_fields(body.version, body.header.correlation_id, body.header.client_id, body)


@settings(max_examples=200, deadline=None)
@given(frame=add_partitions_requests())
def test_add_partitions_requests_decode_as_the_generic_decoder_decodes_them(frame):
    fast = fastcodec.decode_add_partitions(frame)
    assert fast is not None
    assert add_fields(*fast) == generic_add_fields(frame)
    req = codec.decode_request(frame, {24: (0, 3)})
    assert type(req.body) is fastcodec.AddPartitionsBody


@settings(max_examples=400, deadline=None)
@given(frame=add_partitions_requests(), data=st.data())
def test_damaged_add_partitions_requests_decode_alike_or_go_to_the_generic_decoder(frame, data):
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
        expected = generic_add_fields(damaged)
    except Exception:  # noqa: BLE001 - the generic decoder refuses it
        expected = None
    fast = fastcodec.decode_add_partitions(damaged)
    if fast is not None:
        assert add_fields(*fast) == expected
    try:
        req = codec.decode_request(damaged, {24: (0, 3)})
    except codec.ProtocolError:
        assert expected is None
    else:
        assert add_fields(req.api_version, req.correlation_id, req.client_id, req.body) == expected


@settings(max_examples=200, deadline=None)
@given(
    version=st.sampled_from(ADD_VERSIONS),
    correlation_id=int32,
    results=st.lists(st.tuples(names, st.lists(st.tuples(int32, int16), max_size=4)), max_size=3),
)
def test_add_partitions_responses_encode_as_the_generic_encoder_encodes_them(
    version, correlation_id, results
):
    """Against the response as the handler built it before fastcodec."""
    cls = codec.response_class(24).AddPartitionsToTxnTopicResult
    generic = [
        cls(
            name=name,
            results_by_partition=[
                cls.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=c)
                for p, c in parts
            ],
        )
        for name, parts in results
    ]
    req = codec.Request(24, version, correlation_id, None, None)
    body = codec.make_response(req, throttle_time_ms=0, results_by_topic_v3_and_below=generic)
    fast = fastcodec.encode_add_partitions_response(correlation_id, version, results)
    assert bytes(fast) == bytes(codec.encode_response(req, body))


# ---------------------------------------------------------------------- EndTxn

EndTxn = codec.request_class(26)
END_VERSIONS = range(0, fastcodec.END_TXN_MAX_VERSION + 1)


@st.composite
def end_txn_requests(draw):
    version = draw(st.sampled_from(END_VERSIONS))
    body = EndTxn[version](
        transactional_id=draw(names),
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        committed=draw(st.booleans()),
    )
    body.with_header(
        correlation_id=draw(int32), client_id=draw(st.one_of(st.none(), st.text(max_size=10)))
    )
    return bytes(body.encode(header=True, framed=False))


def end_fields(version, correlation_id, client_id, body):
    return (
        version,
        correlation_id,
        client_id,
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        bool(body.committed),
    )


def generic_end_fields(frame: bytes):
    body = generic_decode(frame)
    return end_fields(body.version, body.header.correlation_id, body.header.client_id, body)


@settings(max_examples=200, deadline=None)
@given(frame=end_txn_requests())
def test_end_txn_requests_decode_as_the_generic_decoder_decodes_them(frame):
    fast = fastcodec.decode_end_txn(frame)
    assert fast is not None
    assert end_fields(*fast) == generic_end_fields(frame)
    assert type(fast[3].committed) is bool
    req = codec.decode_request(frame, {26: (0, 5)})
    assert type(req.body) is fastcodec.EndTxnBody


@settings(max_examples=400, deadline=None)
@given(frame=end_txn_requests(), data=st.data())
def test_damaged_end_txn_requests_decode_alike_or_go_to_the_generic_decoder(frame, data):
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
        expected = generic_end_fields(damaged)
    except Exception:  # noqa: BLE001 - the generic decoder refuses it
        expected = None
    fast = fastcodec.decode_end_txn(damaged)
    if fast is not None:
        assert end_fields(*fast) == expected
    try:
        req = codec.decode_request(damaged, {26: (0, 5)})
    except codec.ProtocolError:
        assert expected is None
    else:
        assert end_fields(req.api_version, req.correlation_id, req.client_id, req.body) == expected


@settings(max_examples=200, deadline=None)
@given(
    version=st.sampled_from(END_VERSIONS),
    correlation_id=int32,
    code=int16,
    pid=int64,
    epoch=int16,
)
def test_end_txn_responses_encode_as_the_generic_encoder_encodes_them(
    version, correlation_id, code, pid, epoch
):
    req = codec.Request(26, version, correlation_id, None, None)
    body = codec.make_response(
        req, throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch
    )
    fast = fastcodec.encode_end_txn_response(correlation_id, version, code, pid, epoch)
    assert bytes(fast) == bytes(codec.encode_response(req, body))
