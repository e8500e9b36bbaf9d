"""Records: fetch by partition and offset or timestamp; produce one or many, text or base64."""

from __future__ import annotations

import base64
import datetime as dt

import pytest

from brokerui.audit.models import AuditEntry
from tests.api.conftest import API
from tests.api.test_topics import error

RECORDS = f"{API}/topics/orders/records"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ---------------------------------------------------------------------------------- fetch


def test_fetch_from_an_offset(view, orders):
    body = view.get(RECORDS, {"partition": 1, "offset": 3, "limit": 2}).json()
    assert (body["topic"], body["partition"]) == ("orders", 1)
    assert (body["log_start_offset"], body["end_offset"], body["next_offset"]) == (0, 20, 5)
    first = body["records"][0]
    assert first == {
        "partition": 1,
        "offset": 3,
        "timestamp_ms": orders + 100_000 + 3000,
        "timestamp": dt.datetime.fromtimestamp((orders + 103_000) / 1000, dt.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "key": {"text": "k3", "base64": b64(b"k3"), "size": 2},
        "value": {"text": "v3", "base64": b64(b"v3"), "size": 2},
        "headers": [{"key": "h", "value": {"text": "x", "base64": b64(b"x"), "size": 1}}],
        "size": 6,
    }
    assert [r["offset"] for r in body["records"]] == [3, 4]


def test_fetch_defaults_to_the_log_start_and_100_records(view, orders, broker):
    broker.store.delete_records("orders", {2: 4})
    body = view.get(RECORDS, {"partition": 2}).json()
    assert [r["offset"] for r in body["records"]] == list(range(4, 30))
    assert body["next_offset"] == 30 == body["end_offset"]


@pytest.mark.parametrize("as_iso", [False, True])
def test_fetch_from_a_timestamp(view, orders, as_iso):
    when = orders + 200_000 + 7_500  # between partition 2's records 7 and 8
    param = dt.datetime.fromtimestamp(when / 1000, dt.UTC).isoformat() if as_iso else when
    body = view.get(RECORDS, {"partition": 2, "timestamp": param, "limit": 1}).json()
    assert [r["offset"] for r in body["records"]] == [8]


def test_fetch_after_the_last_timestamp_is_empty_at_the_end(view, orders):
    body = view.get(RECORDS, {"partition": 0, "timestamp": orders + 10**9}).json()
    assert body["records"] == [] and body["next_offset"] == 10


def test_fetch_at_the_end_is_empty(view, orders):
    body = view.get(RECORDS, {"partition": 0, "offset": 10}).json()
    assert body["records"] == [] and body["next_offset"] == 10


def test_binary_values_have_no_text(view, broker):
    broker.store.create_topic("bin", 1)
    broker.store.append("bin", b"\xff\x00\xfe", key=None, headers=[("raw", b"\x80"), ("n", None)])
    record = view.get(f"{API}/topics/bin/records", {"partition": 0}).json()["records"][0]
    assert record["key"] is None
    assert record["value"] == {"text": None, "base64": b64(b"\xff\x00\xfe"), "size": 3}
    assert record["headers"] == [
        {"key": "raw", "value": {"text": None, "base64": b64(b"\x80"), "size": 1}},
        {"key": "n", "value": None},
    ]


def test_offset_past_the_end_is_416_with_both_bounds(view, orders):
    err = error(view.get(RECORDS, {"partition": 1, "offset": 21}), 416)
    assert err["code"] == "offset_out_of_range"
    assert (err["log_start_offset"], err["end_offset"], err["offset"]) == (0, 20, 21)
    assert (err["topic"], err["partition"]) == ("orders", 1)


def test_offset_below_the_log_start_is_416_with_both_bounds(view, orders, broker):
    broker.store.delete_records("orders", {1: 12})
    err = error(view.get(RECORDS, {"partition": 1, "offset": 3}), 416)
    assert (err["code"], err["log_start_offset"], err["end_offset"]) == (
        "offset_out_of_range",
        12,
        20,
    )
    assert error(view.get(RECORDS, {"partition": 1, "offset": -1}), 416)["log_start_offset"] == 12


@pytest.mark.parametrize("partition", [3, -1])
def test_fetch_from_an_unknown_partition(view, orders, partition):
    err = error(view.get(RECORDS, {"partition": partition}), 404)
    assert err["code"] == "unknown_partition"
    assert (err["topic"], err["partition"], err["partition_count"]) == ("orders", partition, 3)


@pytest.mark.parametrize(
    "params, field",
    [
        ({}, "partition"),
        ({"partition": "zero"}, "partition"),
        ({"partition": 0, "limit": 0}, "limit"),
        ({"partition": 0, "limit": 1001}, "limit"),
        ({"partition": 0, "offset": 1, "timestamp": 5}, "non_field_errors"),
        ({"partition": 0, "timestamp": "last tuesday"}, "timestamp"),
    ],
)
def test_fetch_with_bad_parameters(view, orders, params, field):
    err = error(view.get(RECORDS, params), 400)
    assert err["code"] == "invalid_request" and field in err["fields"]


# -------------------------------------------------------------------------------- produce


def test_produce_one_record_as_text(op, orders, broker):
    r = op.post(RECORDS, {"key": "k-new", "value": "hello ☃", "partition": 0}, format="json")
    assert r.status_code == 201
    body = r.json()
    assert body["topic"] == "orders" and len(body["records"]) == 1
    out = body["records"][0]
    assert (out["partition"], out["offset"]) == (0, 10) and out["timestamp"].endswith("Z")
    stored = broker.store.read("orders", 0, 10)[0]
    assert (stored.key, stored.value) == (b"k-new", "hello ☃".encode())

    entry = AuditEntry.objects.get(action="records.produce")
    assert entry.source == "api" and entry.target == "topic orders"
    assert entry.after == {
        "records": 1,
        "tombstones": 0,
        "partitions": {"0": {"first": 10, "last": 10, "count": 1}},
    }


def test_produce_many_with_base64_headers_timestamps_and_a_tombstone(op, orders, broker):
    t = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    records = [
        {
            "key": {"base64": b64(b"\x00\x01")},
            "value": {"base64": b64(b"\xff\xfe")},
            "headers": [
                {"key": "trace", "value": "abc"},
                {"key": "bin", "value": {"base64": "gA=="}},
                {"key": "none", "value": None},
            ],
            "partition": 2,
            "timestamp": "2024-05-01T12:00:00Z",
        },
        {"key": "gone", "value": None, "partition": 2, "timestamp": int(t.timestamp() * 1000) + 1},
        {"value": {"text": "plain"}, "partition": 1, "timestamp_ms": 42},
    ]
    r = op.post(RECORDS, {"records": records}, format="json")
    assert r.status_code == 201
    out = r.json()["records"]
    assert [(o["partition"], o["offset"]) for o in out] == [(2, 30), (2, 31), (1, 20)]
    assert [o["timestamp_ms"] for o in out] == [
        int(t.timestamp() * 1000),
        int(t.timestamp() * 1000) + 1,
        42,
    ]
    first, tomb = broker.store.read("orders", 2, 30)
    assert (first.key, first.value) == (b"\x00\x01", b"\xff\xfe")
    assert first.headers == (("trace", b"abc"), ("bin", b"\x80"), ("none", None))
    assert (tomb.key, tomb.value) == (b"gone", None)
    entry = AuditEntry.objects.get(action="records.produce")
    assert entry.after == {
        "records": 3,
        "tombstones": 1,
        "partitions": {
            "1": {"first": 20, "last": 20, "count": 1},
            "2": {"first": 30, "last": 31, "count": 2},
        },
    }


def test_produce_a_bare_list(op, orders):
    r = op.post(
        RECORDS, [{"value": "a", "partition": 0}, {"value": "b", "partition": 0}], format="json"
    )
    assert [o["offset"] for o in r.json()["records"]] == [10, 11]


def test_keyed_records_go_to_the_key_partition(op, orders, broker):
    from streams.log.partitioner import partition_for_key

    r = op.post(RECORDS, {"key": "customer-7", "value": "x"}, format="json")
    assert r.json()["records"][0]["partition"] == partition_for_key(b"customer-7", 3)


def test_a_fetched_record_can_be_posted_back(op, orders, broker):
    fetched = op.get(RECORDS, {"partition": 1, "offset": 4, "limit": 1}).json()["records"][0]
    r = op.post(f"{API}/topics/orders/records", fetched, format="json")
    assert r.status_code == 201, r.json()
    copy = broker.store.read("orders", 1, 20)[0]
    original = broker.store.read("orders", 1, 4, max_records=1)[0]
    assert (copy.key, copy.value, copy.headers, copy.timestamp_ms) == (
        original.key,
        original.value,
        original.headers,
        original.timestamp_ms,
    )


@pytest.mark.parametrize(
    "record, path, code",
    [
        ({"value": {"base64": "not base64!"}}, ("value",), "invalid_base64"),
        ({"value": "x", "key": {"base64": "YQ"}}, ("key",), "invalid_base64"),
        ({"value": "x", "key": {"base64": 12}}, ("key",), "invalid_base64"),
        ({"value": 42}, ("value",), "invalid"),
        ({"value": {"hex": "00"}}, ("value",), "unknown_keys"),
        (
            {"value": "x", "headers": {"trace": "abc"}},
            ("headers", "non_field_errors"),
            "not_a_list",
        ),
        ({"value": "x", "headers": ["trace=abc"]}, ("headers", "0", "non_field_errors"), "invalid"),
        ({"value": "x", "headers": [{"value": "abc"}]}, ("headers", "0", "key"), "required"),
        ({"value": "x", "headers": [{"key": "k"}]}, ("headers", "0", "value"), "required"),
        ({"value": "x", "headers": [{"key": 5, "value": "v"}]}, ("headers", "0", "key"), "invalid"),
        (
            {"value": "x", "headers": [{"key": "k", "value": {"base64": "%%"}}]},
            ("headers", "0", "value"),
            "invalid_base64",
        ),
        (
            {"value": "x", "headers": [{"key": "k", "value": "v", "extra": 1}]},
            ("headers", "0", "extra"),
            "unknown_field",
        ),
        ({"key": "only a key"}, ("value",), "required"),
        ({"value": "x", "timestamp": "noon"}, ("timestamp",), "invalid"),
        ({"value": "x", "timestamp": 5, "timestamp_ms": 6}, ("timestamp",), "invalid"),
        ({"value": "x", "partition": "first"}, ("partition",), "invalid"),
    ],
)
def test_malformed_records_are_400_with_the_field(op, orders, broker, record, path, code):
    err = error(op.post(RECORDS, {"records": [{"value": "fine"}, record]}, format="json"), 400)
    assert err["code"] == "invalid_request"
    node = err["fields"]["records"]["1"]
    for step in path:
        node = node[step]
    assert node[0]["code"] == code, node
    assert err["message"].startswith("records[1]")
    assert sum(p.end_offset for p in broker.store.describe_topic("orders").partitions) == 60


@pytest.mark.parametrize("body", [{"records": []}, {}, [], {"records": "x"}])
def test_produce_needs_records(op, orders, body):
    assert error(op.post(RECORDS, body, format="json"), 400)["code"] == "invalid_request"


def test_an_unknown_partition_is_refused_before_anything_is_written(op, orders, broker):
    records = [{"value": "ok", "partition": 0}, {"value": "bad", "partition": 9}]
    err = error(op.post(RECORDS, {"records": records}, format="json"), 404)
    assert err["code"] == "unknown_partition" and err["record_index"] == 1
    assert broker.store.offsets("orders", 0) == (0, 10)
    assert not AuditEntry.objects.exists()


def test_an_oversized_record_is_413(op, orders, broker):
    broker.store.alter_config("orders", {"max.message.bytes": "1000"})
    err = error(op.post(RECORDS, {"value": "x" * 2000, "partition": 0}, format="json"), 413)
    assert err["code"] == "record_too_large" and "max.message.bytes=1000" in err["message"]
    assert err["record_index"] == 0 and err["produced"] == []
    assert broker.store.offsets("orders", 0) == (0, 10)


def test_a_refusal_mid_batch_reports_what_was_produced(op, orders, broker):
    broker.store.alter_config("orders", {"max.message.bytes": "1000"})
    records = [{"value": "small", "partition": 0}, {"value": "x" * 2000, "partition": 0}]
    err = error(op.post(RECORDS, {"records": records}, format="json"), 413)
    assert err["record_index"] == 1
    assert [(p["partition"], p["offset"]) for p in err["produced"]] == [(0, 10)]
    entry = AuditEntry.objects.get(action="records.produce")  # what was written is audited
    assert entry.after["partitions"] == {"0": {"first": 10, "last": 10, "count": 1}}
    assert entry.after["records"] == 1 and entry.after["error"].startswith("record 2 was refused")
