"""The compiled taking of a Kafka fetch (streams/jobs/_ckafka.pyx, built by `make native`)
against ``kafka.take_messages``, the reference: for any fetch of confluent-kafka ``Message``s
(records of assigned and unassigned partitions, end-of-partition and other errors, null keys
and values), both leave the same ``LogRecord``s in the same buffers and return the same errors.
The messages are real ``confluent_kafka.Message`` objects (the client's own constructor)."""

from __future__ import annotations

from collections import deque

from confluent_kafka import KafkaError, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs import kafka
from streams.jobs.logs import LogRecord

try:
    from streams.jobs import _ckafka
except ImportError:  # reported by the test below
    _ckafka = None

TOPICS = ["in", "other", ""]
ERRORS = [KafkaError._PARTITION_EOF, KafkaError._TRANSPORT, KafkaError.UNKNOWN_TOPIC_OR_PART]


def test_the_compiled_taker_is_built_and_used():
    assert _ckafka is not None, "streams/jobs/_ckafka.so is not built: make native"
    assert kafka._take is _ckafka.take


@st.composite
def messages(draw):
    topic = draw(st.sampled_from(TOPICS))
    partition = draw(st.integers(0, 2))
    if draw(st.integers(0, 9)) == 0:
        code = draw(st.sampled_from(ERRORS))
        return Message(topic=topic, partition=partition, error=KafkaError(code))
    return Message(
        topic=topic,
        partition=partition,
        offset=draw(st.integers(0, 2**40)),
        key=draw(st.none() | st.binary(max_size=5)),
        value=draw(st.none() | st.binary(max_size=8)),
        timestamp=(draw(st.sampled_from([0, 1, 2])), draw(st.integers(-1, 2**42))),
    )


def _runs(msgs):
    """Messages in runs of one partition, as a fetch gives them (and mixed, as it may not)."""
    return st.sampled_from([msgs, sorted(msgs, key=lambda m: (m.topic(), m.partition()))])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(messages(), max_size=40).flatmap(_runs),
    st.sets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 2))),
)
def test_compiled_and_reference_take_alike(msgs, ours):
    assert _ckafka is not None, "streams/jobs/_ckafka.so is not built: make native"
    ref: dict = {tp: deque() for tp in ours}
    got: dict = {tp: deque() for tp in ours}
    ref_errors = kafka.take_messages(msgs, ref, LogRecord)
    got_errors = _ckafka.take(msgs, got, LogRecord)
    assert got == ref
    for tp, buf in got.items():
        assert all(type(r) is LogRecord for r in buf), tp
        assert [r.offset for r in buf] == [r.offset for r in ref[tp]]
    assert [e.code() for e in got_errors] == [e.code() for e in ref_errors]
    assert all(e.code() != KafkaError._PARTITION_EOF for e in got_errors)


def test_records_of_the_fetch_in_their_buffers():
    msgs = [
        Message(topic="in", partition=0, offset=7, key=b"k", value=b"v", timestamp=(1, 5)),
        Message(topic="in", partition=1, offset=3, key=None, value=None, timestamp=(1, 6)),
        Message(topic="in", partition=0, error=KafkaError(KafkaError._PARTITION_EOF)),
        Message(topic="in", partition=0, error=KafkaError(KafkaError._TRANSPORT)),
        Message(topic="in", partition=0, offset=8, key=b"k2", value=b"w", timestamp=(1, 9)),
    ]
    for take in (kafka.take_messages, kafka._take):
        buffers: dict = {("in", 0): deque()}  # partition 1 is not ours
        errors = take(msgs, buffers, LogRecord)
        assert list(buffers[("in", 0)]) == [LogRecord(7, b"k", b"v", 5), (8, b"k2", b"w", 9)]
        assert [e.code() for e in errors] == [KafkaError._TRANSPORT]
