"""Bad input never gets past one connection: the codec under random and mutated frames, and
sockets sending garbage, absurd sizes, unknown APIs or unsupported versions; plus the ApiVersions
fallback and back-pressure (a connection is not read while `max_in_flight` requests pend)."""

from __future__ import annotations

import logging
import os
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.errors import ProtocolError
from streams.protocol import codec
from streams.protocol.handlers import SUPPORTED_VERSIONS
from tests.protocol.conftest import open_broker
from tests.protocol.test_produce_fetch_wire import FETCH, batch, fetch_request, produce
from tests.protocol.wire import WireClient

FUZZ_EXAMPLES = int(os.environ.get("TIDELOG_PROTOCOL_FUZZ_EXAMPLES", "300"))


def _valid_frames() -> list[bytes]:
    """Real requests as clients send them, one per API and a few versions each."""
    frames = []
    for key, (_, top) in sorted(SUPPORTED_VERSIONS.items()):
        cls = codec.request_class(key)
        for version in sorted({0, top // 2, top}):
            try:
                req = cls[version]()
                req.with_header(correlation_id=7, client_id="fuzz")
                frames.append(bytes(req.encode(header=True)))
            except Exception:  # noqa: BLE001 - some versions need fields; skip those
                continue
    return frames


VALID = _valid_frames()


def _decode(frame: bytes) -> None:
    try:
        codec.decode_request(frame, SUPPORTED_VERSIONS)
    except ProtocolError:
        pass  # the one error type the decoder may raise


def test_the_fuzz_corpus_covers_most_apis():
    assert len({codec.peek_header(f)[0] for f in VALID}) >= 20
    for frame in VALID:
        codec.decode_request(frame, SUPPORTED_VERSIONS)  # the unmutated frames decode


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_protocol_errors(data):
    _decode(data)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(
    st.sampled_from(VALID),
    st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6),
    st.integers(0, 1 << 16),
    st.binary(max_size=8),
)
def test_mutated_frames_raise_only_protocol_errors(frame, flips, cut, insert):
    data = bytearray(frame)
    for pos, value in flips:
        if data:
            data[pos % len(data)] = value
    data = data[: max(cut % (len(data) + 1), 0)] + insert
    _decode(bytes(data))


def _assert_still_serving(bootstrap: str) -> None:
    with WireClient(bootstrap) as other:
        meta = other.call(3, 1, topics=None)
        assert "survivor" in {t.name for t in meta.topics}


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x03abc",  # a frame shorter than a request header
        b"\x7f\xff\xff\xff" + b"x" * 100,  # an absurd size
        b"\xff\xff\xff\xf0",  # a negative size
        struct.pack(">ihhi", 8, 999, 0, 1),  # an unknown API key
        struct.pack(">ihhi", 8, 0, 99, 1),  # an unsupported Produce version
        # random bytes, under a fixed id: pytest-xdist's workers must collect the same names
        pytest.param(struct.pack(">i", 30) + os.urandom(30), id="random-bytes"),
        struct.pack(">ihhih", 36, 3, 9, 1, 500) + b"\x00" * 26,  # Metadata with a lying length
    ],
)
def test_garbage_closes_only_its_connection(broker, bootstrap, garbage):
    broker.store.create_topic("survivor", 1)
    broker.store.append("survivor", b"kept")
    with WireClient(bootstrap) as bad, WireClient(bootstrap) as good:
        bad.send_raw(garbage)
        assert bad.is_closed_by_peer()
        assert good.call(3, 1, topics=None).brokers[0].node_id == 0
    _assert_still_serving(bootstrap)
    assert [r.value for r in broker.store.read("survivor", 0, 0)] == [b"kept"]


def test_truncated_frame_then_disconnect_leaves_others_working(broker, bootstrap):
    broker.store.create_topic("survivor", 1)
    bad = WireClient(bootstrap)
    bad.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x01")
    bad.close()
    _assert_still_serving(bootstrap)


def test_request_size_limit_is_configurable(tmp_path):
    broker = open_broker(tmp_path / "data", max_request_bytes=1024)
    host, port = broker.kafka_address
    try:
        with WireClient(f"{host}:{port}") as c:
            code, _ = produce(c, "small", batch([b"x" * 100]))
            assert code == 0
            c.send_raw(struct.pack(">i", 2048) + b"\x00" * 2048)
            assert c.is_closed_by_peer()
    finally:
        broker.close()


def test_api_versions_of_an_unknown_version_get_the_v0_fallback(broker, bootstrap):
    with WireClient(bootstrap) as c:
        req = codec.request_class(18)[3](client_software_name="x", client_software_version="1")
        req.with_header(correlation_id=42, client_id="old")
        frame = bytearray(req.encode(header=True))
        frame[2:4] = struct.pack(">h", 9)  # a version from the future
        c.send_raw(struct.pack(">i", len(frame)) + bytes(frame))
        raw = c.recv_frame()
        resp = codec.response_class(18)[0].decode(raw, header=True)
        assert resp.header.correlation_id == 42
        assert resp.error_code == 35
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert ranges == SUPPORTED_VERSIONS
        assert all(lo == 0 for lo, _ in ranges.values())  # old librdkafka needs v0 in range
        # the connection stays usable: the client retries with a version it shares
        assert c.call(18, 3, client_software_name="x", client_software_version="1").error_code == 0


def test_back_pressure_stops_reading_while_requests_are_pending(tmp_path):
    broker = open_broker(tmp_path / "data", max_in_flight=1)
    host, port = broker.kafka_address
    broker.store.create_topic("bp", 1)
    try:
        with WireClient(f"{host}:{port}") as c:
            c.send(FETCH, 11, **fetch_request("bp", 0, max_wait_ms=60_000))  # pends
            produce(c, "bp", batch([b"queued"]), acks=0)  # must not be read meanwhile
            time.sleep(0.5)
            assert broker.store.offsets("bp", 0) == (0, 0)
            broker.store.append("bp", b"first")  # wakes the fetch; then the produce is read
            resp = c.recv(FETCH, 11)
            assert resp.responses[0].partitions[0].high_watermark == 1
            meta = c.call(3, 1, topics=None)  # after the acks=0 produce, in order
            assert meta.brokers[0].node_id == 0
        assert [r.value for r in broker.store.read("bp", 0, 0)] == [b"first", b"queued"]
    finally:
        broker.close()


def test_every_api_answers_requests_with_default_fields_without_internal_errors(
    broker, bootstrap, caplog
):
    """Empty and default-valued requests of every advertised API and several versions reach
    the handlers: each gets a response (or, for acks=0, none), never an internal error."""
    caplog.set_level(logging.WARNING, logger="streams.protocol")
    for frame in VALID:
        api_key, version, correlation = codec.peek_header(frame)
        with WireClient(bootstrap, timeout=10) as c:
            c.send_raw(struct.pack(">i", len(frame)) + frame)
            if api_key == 0 and version >= 0:  # acks defaults to 0: no response
                c.call(3, 1, topics=None)
                continue
            resp = codec.response_class(api_key)[version].decode(c.recv_frame(), header=True)
            assert resp.header.correlation_id == correlation
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert problems == []


# APIs Kafka defines that Tidelog does not serve (never advertised), each at a version whose
# response has a top-level error_code: DescribeClientQuotas, DescribeLogDirs,
# DescribeUserScramCredentials, ListPartitionReassignments, DescribeQuorum
UNSERVED = [(48, 1), (35, 4), (50, 0), (46, 0), (55, 1)]


@pytest.mark.parametrize(("api_key", "version"), UNSERVED)
def test_an_unserved_kafka_api_gets_unsupported_version_and_the_connection_stays(
    broker, bootstrap, api_key, version
):
    assert api_key not in SUPPORTED_VERSIONS
    with WireClient(bootstrap) as c:
        resp = c.call(api_key, version)  # every request field at its default
        assert resp.error_code == 35
        assert c.call(18, 3, client_software_name="x", client_software_version="1").error_code == 0


def test_an_unserved_api_without_a_top_level_error_code_gets_an_empty_answer(broker, bootstrap):
    with WireClient(bootstrap) as c:
        resp = c.call(35, 1)  # DescribeLogDirs v1: errors live per directory, of which none
        assert resp.results == []
        assert c.call(3, 1, topics=None).brokers[0].node_id == 0


def test_an_unserved_api_without_a_known_response_shape_closes_with_a_log_line(
    broker, bootstrap, caplog
):
    broker.store.create_topic("survivor", 1)
    with caplog.at_level(logging.WARNING, logger="streams.protocol"):
        with WireClient(bootstrap) as c:
            c.send_raw(struct.pack(">ihhi", 8, 4, 0, 1))  # LeaderAndIsr: inter-broker only
            assert c.is_closed_by_peer()
    assert any("no response shape" in r.getMessage() for r in caplog.records)
    _assert_still_serving(bootstrap)


@pytest.mark.parametrize("version", [3, 9])
def test_a_null_where_kafka_allows_none_closes_cleanly(broker, bootstrap, caplog, version):
    """A Produce whose partition array is null (length -1: the generic decoder reads None,
    and the hand decoder gives such a frame up to it) is refused as a malformed request, as
    Kafka's parser refuses it: the connection closes with one line saying which field, no
    handler meets the None (no internal error, no traceback), and others go on."""
    broker.store.create_topic("survivor", 1)
    broker.store.append("survivor", b"kept")
    cls = codec.request_class(0)[version]
    req = cls(
        acks=1, timeout_ms=1000,
        topic_data=[cls.TopicProduceData(name="survivor", partition_data=None)],
    )  # fmt: skip
    req.with_header(correlation_id=5, client_id="bad")
    frame = bytes(req.encode(header=True))
    with caplog.at_level(logging.INFO, logger="streams.protocol"):
        with WireClient(bootstrap) as bad:
            bad.send_raw(struct.pack(">i", len(frame)) + frame)
            assert bad.is_closed_by_peer()
    said = [r for r in caplog.records if "partition_data is null" in r.getMessage()]
    assert said, [r.getMessage() for r in caplog.records]
    assert not any(r.exc_info or "internal error" in r.getMessage() for r in caplog.records)
    _assert_still_serving(bootstrap)
    assert [r.value for r in broker.store.read("survivor", 0, 0)] == [b"kept"]
