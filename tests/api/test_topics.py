"""Topics: list, create, describe, config, partitions, delete, purge — and their bad input."""

from __future__ import annotations

import json

import pytest

from brokerui.audit.models import AuditEntry
from tests.api.conftest import API


def error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"])
    return body["error"]


def audit(action: str) -> AuditEntry:
    entry = AuditEntry.objects.get(action=action)
    assert entry.source == "api"
    return entry


# ---------------------------------------------------------------------------------- list


def test_list_filters_and_hides_internal_topics(view, orders, broker):
    broker.store.create_topic("payments", 1)
    names = lambda r: [t["name"] for t in r.json()["topics"]]  # noqa: E731

    assert names(view.get(f"{API}/topics")) == ["orders", "payments"]
    assert names(view.get(f"{API}/topics", {"filter": "PAY"})) == ["payments"]
    every = view.get(f"{API}/topics", {"include_internal": "true"}).json()
    assert "__consumer_offsets" in [t["name"] for t in every["topics"]]
    assert every["count"] == len(every["topics"])
    row = next(t for t in every["topics"] if t["name"] == "orders")
    assert row["partitions"] == 3 and row["record_count"] == 60 and row["size_bytes"] > 0
    assert row["internal"] is False and row["cleanup_policy"] == "delete"


def test_list_with_a_bad_boolean_is_400(view, broker):
    err = error(view.get(f"{API}/topics", {"include_internal": "maybe"}), 400)
    assert err["code"] == "invalid_request" and "include_internal" in err["fields"]


# -------------------------------------------------------------------------------- create


def test_create_returns_the_description_and_audits(op, broker):
    response = op.post(
        f"{API}/topics",
        {
            "name": "clicks",
            "partitions": 4,
            "config": {"retention.ms": 3600000, "cleanup.policy": "compact"},
        },
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "clicks" and len(body["partitions"]) == 4
    assert body["overrides"] == {"retention.ms": "3600000", "cleanup.policy": "compact"}
    assert body["config"]["retention.ms"] == "3600000"
    assert broker.store.partition_count("clicks") == 4

    entry = audit("topic.create")
    assert entry.target == "topic clicks" and entry.username == "olivia"
    assert entry.after == {"partitions": 4, "config": body["overrides"]}
    audited = broker.store.read("__audit", 0, 0)
    assert json.loads(audited[-1].value)["source"] == "api"


def test_create_defaults_to_one_partition(op, broker):
    assert len(op.post(f"{API}/topics", {"name": "one"}, format="json").json()["partitions"]) == 1


@pytest.mark.parametrize("name", ["", "has space", "a" * 250, "..", "slash/no", "ünï"])
def test_create_with_an_invalid_name(op, broker, name):
    err = error(op.post(f"{API}/topics", {"name": name}, format="json"), 400)
    assert err["code"] == "invalid_topic_name"
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    "config, key",
    [
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"cleanup.policy": "never"}, "cleanup.policy"),
        ({"no.such.key": "1"}, "no.such.key"),
        ({"segment.bytes": 10}, "segment.bytes"),
    ],
)
def test_create_with_a_bad_config(op, broker, config, key):
    err = error(op.post(f"{API}/topics", {"name": "t", "config": config}, format="json"), 400)
    assert err["code"] == "invalid_config" and err["key"] == key and err["reason"]
    assert "t" not in broker.store.list_topics()


@pytest.mark.parametrize("partitions", [0, -1, 10_001])
def test_create_with_invalid_partitions(op, broker, partitions):
    response = op.post(f"{API}/topics", {"name": "t", "partitions": partitions}, format="json")
    assert error(response, 400)["code"] == "invalid_partitions"


def test_create_an_existing_topic_is_409(op, orders):
    err = error(op.post(f"{API}/topics", {"name": "orders"}, format="json"), 409)
    assert err["code"] == "topic_already_exists" and err["topic"] == "orders"


def test_create_an_internal_name_is_refused(op, broker):
    err = error(op.post(f"{API}/topics", {"name": "__sneaky"}, format="json"), 403)
    assert err["code"] == "internal_topic"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"partitions": 1}, "name"),
        ({"name": "t", "partitions": "many"}, "partitions"),
        ({"name": "t", "config": {"retention.ms": None}}, "config"),
        ({"name": "t", "config": ["retention.ms"]}, "config"),
        ({"name": "t", "replication": 3}, "replication"),
    ],
)
def test_create_with_a_malformed_body(op, broker, body, field):
    err = error(op.post(f"{API}/topics", body, format="json"), 400)
    assert err["code"] == "invalid_request" and field in err["fields"]
    assert field in err["message"]


def test_unknown_field_has_its_own_field_code(op, broker):
    err = error(op.post(f"{API}/topics", {"name": "t", "partiton": 2}, format="json"), 400)
    assert err["fields"]["partiton"][0]["code"] == "unknown_field"


def test_malformed_json_is_400(op, broker):
    response = op.post(f"{API}/topics", data='{"name": ', content_type="application/json")
    assert error(response, 400)["code"] == "parse_error"


def test_other_media_types_are_415(op, broker):
    response = op.post(f"{API}/topics", data="name=t", content_type="text/plain")
    assert error(response, 415)["code"] == "unsupported_media_type"


def test_oversized_request_body_is_413(op, broker, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = op.post(f"{API}/topics", {"name": "t" * 2000}, format="json")
    err = error(response, 413)
    assert err["code"] == "request_too_large" and err["limit_bytes"] == 1000


# ------------------------------------------------------------------------------ describe


def test_describe_has_partitions_config_and_groups(view, billing):
    body = view.get(f"{API}/topics/orders").json()
    assert body["name"] == "orders" and body["record_count"] == 60
    parts = body["partitions"]
    assert [(p["partition"], p["log_start_offset"], p["end_offset"]) for p in parts] == [
        (0, 0, 10),
        (1, 0, 20),
        (2, 0, 30),
    ]
    assert all(p["size_bytes"] > 0 and p["segment_count"] == 1 for p in parts)
    assert parts[0]["last_append"].endswith("Z")
    assert body["config"]["cleanup.policy"] == "delete" and body["overrides"] == {}
    assert body["groups"] == [{"group_id": "billing", "state": "Empty", "lag": 5}]


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("get", "/topics/nope", None),
        ("delete", "/topics/nope", None),
        ("get", "/topics/nope/config", None),
        ("patch", "/topics/nope/config", {"set": {"retention.ms": "1"}}),
        ("post", "/topics/nope/partitions", {"total": 2}),
        ("post", "/topics/nope/purge", {"all": True}),
        ("get", "/topics/nope/records?partition=0", None),
        ("post", "/topics/nope/records", {"value": "x"}),
    ],
)
def test_unknown_topic_is_404_everywhere(op, broker, method, path, body):
    err = error(getattr(op, method)(API + path, body, format="json"), 404)
    assert err["code"] == "unknown_topic" and err["topic"] == "nope"


# -------------------------------------------------------------------------------- config


def test_config_get_and_patch(op, orders, broker):
    assert op.get(f"{API}/topics/orders/config").json()["overrides"] == {}
    r = op.patch(
        f"{API}/topics/orders/config",
        {"set": {"retention.ms": 60000, "max.message.bytes": "2000"}},
        format="json",
    )
    assert r.status_code == 200
    assert r.json()["overrides"] == {"retention.ms": "60000", "max.message.bytes": "2000"}
    r = op.patch(f"{API}/topics/orders/config", {"delete": ["retention.ms"]}, format="json")
    assert r.json()["overrides"] == {"max.message.bytes": "2000"}
    assert r.json()["config"]["retention.ms"] == "604800000"
    assert broker.store.describe_topic("orders").overrides == {"max.message.bytes": "2000"}

    first, second = AuditEntry.objects.filter(action="topic.config").order_by("id")
    assert first.before == {} and first.after == {
        "retention.ms": "60000",
        "max.message.bytes": "2000",
    }
    assert second.before == first.after and second.after == {"max.message.bytes": "2000"}
    assert {first.source, second.source} == {"api"}


def test_config_patch_bad_value_changes_nothing(op, orders, broker):
    r = op.patch(f"{API}/topics/orders/config", {"set": {"retention.ms": "-5"}}, format="json")
    err = error(r, 400)
    assert err["code"] == "invalid_config" and err["key"] == "retention.ms"
    assert broker.store.describe_topic("orders").overrides == {}


def test_config_delete_of_an_unknown_key(op, orders):
    r = op.patch(f"{API}/topics/orders/config", {"delete": ["retention.mss"]}, format="json")
    err = error(r, 400)
    assert err["code"] == "invalid_config" and err["key"] == "retention.mss"


@pytest.mark.parametrize(
    "body",
    [{}, {"set": {"retention.ms": "1"}, "delete": ["retention.ms"]}, {"set": "retention.ms=1"}],
)
def test_config_patch_malformed(op, orders, body):
    err = error(op.patch(f"{API}/topics/orders/config", body, format="json"), 400)
    assert err["code"] == "invalid_request"


# ---------------------------------------------------------------------------- partitions


def test_add_partitions(op, orders, broker):
    r = op.post(f"{API}/topics/orders/partitions", {"total": 5}, format="json")
    assert r.status_code == 200 and len(r.json()["partitions"]) == 5
    assert broker.store.partition_count("orders") == 5
    entry = audit("topic.add_partitions")
    assert entry.before == {"partitions": 3} and entry.after == {"partitions": 5}


@pytest.mark.parametrize("total", [2, 3, 0])
def test_partitions_never_shrink(op, orders, total):
    r = op.post(f"{API}/topics/orders/partitions", {"total": total}, format="json")
    assert error(r, 400)["code"] == "invalid_partitions"


def test_add_partitions_needs_a_total(op, orders):
    err = error(op.post(f"{API}/topics/orders/partitions", {}, format="json"), 400)
    assert err["code"] == "invalid_request" and "total" in err["fields"]


# -------------------------------------------------------------------------------- delete


def test_delete_topic(op, orders, broker):
    r = op.delete(f"{API}/topics/orders")
    assert r.status_code == 204 and not r.content
    assert "orders" not in broker.store.list_topics()
    entry = audit("topic.delete")
    assert entry.before["partitions"] == 3 and entry.before["records"] == 60
    assert entry.before["config"] == {} and entry.after is None
    assert entry.before["end_offsets"] == {"0": 10, "1": 20, "2": 30}
    assert error(op.get(f"{API}/topics/orders"), 404)["code"] == "unknown_topic"


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("delete", "/topics/__consumer_offsets", None),
        ("post", "/topics/__consumer_offsets/purge", {"all": True}),
        ("post", "/topics/__consumer_offsets/partitions", {"total": 60}),
        ("patch", "/topics/__consumer_offsets/config", {"set": {"retention.ms": "1"}}),
        ("post", "/topics/__consumer_offsets/records", {"value": "junk"}),
    ],
)
def test_internal_topics_are_read_only(op, broker, method, path, body):
    before = broker.store.describe_topic("__consumer_offsets")
    err = error(getattr(op, method)(API + path, body, format="json"), 403)
    assert err["code"] == "internal_topic" and err["topic"] == "__consumer_offsets"
    assert broker.store.describe_topic("__consumer_offsets") == before
    assert op.get(f"{API}/topics/__consumer_offsets").status_code == 200


# --------------------------------------------------------------------------------- purge


def test_purge_below_an_offset_in_every_partition(op, orders, broker):
    r = op.post(f"{API}/topics/orders/purge", {"before_offset": 15}, format="json")
    assert r.status_code == 200
    body = r.json()
    assert body["records_deleted"] == 10 + 15 + 15
    assert [
        (
            p["partition"],
            p["log_start_offset_before"],
            p["log_start_offset_after"],
            p["records_deleted"],
        )
        for p in body["partitions"]
    ] == [(0, 0, 10, 10), (1, 0, 15, 15), (2, 0, 15, 15)]
    assert broker.store.offsets("orders", 1) == (15, 20)
    entry = audit("topic.purge")
    assert entry.before == {"log_start_offsets": {"0": 0, "1": 0, "2": 0}}
    assert entry.after["log_start_offsets"] == {"0": 10, "1": 15, "2": 15}
    assert entry.after["records_deleted"] == 40
    assert entry.after["request"] == {"partition": "all", "mode": "offset", "before_offset": 15}


def test_purge_one_partition_before_a_timestamp(op, orders, broker):
    t0 = orders
    when = t0 + 100_000 + 5_000  # partition 1's sixth record
    r = op.post(
        f"{API}/topics/orders/purge", {"partitions": [1], "before_timestamp": when}, format="json"
    )
    assert r.json()["partitions"] == [
        {
            "partition": 1,
            "log_start_offset_before": 0,
            "log_start_offset_after": 5,
            "records_deleted": 5,
        }
    ]
    assert broker.store.offsets("orders", 0) == (0, 10)


def test_purge_before_an_iso_timestamp(op, orders, broker):
    import datetime as dt

    iso = dt.datetime.fromtimestamp((orders + 3000) / 1000, dt.UTC).isoformat()
    r = op.post(
        f"{API}/topics/orders/purge", {"partitions": [0], "before_timestamp": iso}, format="json"
    )
    assert r.json()["records_deleted"] == 3


def test_purge_all(op, orders, broker):
    r = op.post(f"{API}/topics/orders/purge", {"all": True, "partitions": [0, 2]}, format="json")
    assert r.json()["records_deleted"] == 40
    assert broker.store.offsets("orders", 2) == (30, 30)
    assert broker.store.offsets("orders", 1) == (0, 20)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"all": False},
        {"all": True, "before_offset": 3},
        {"before_offset": 3, "before_timestamp": 5},
        {"partitions": [], "all": True},
        {"before_timestamp": "yesterday"},
    ],
)
def test_purge_needs_exactly_one_bound(op, orders, broker, body):
    err = error(op.post(f"{API}/topics/orders/purge", body, format="json"), 400)
    assert err["code"] == "invalid_request"
    assert broker.store.offsets("orders", 0) == (0, 10)


def test_purge_an_unknown_partition(op, orders, broker):
    r = op.post(f"{API}/topics/orders/purge", {"all": True, "partitions": [0, 7]}, format="json")
    err = error(r, 404)
    assert err["code"] == "unknown_partition"
    assert (err["partition"], err["partition_count"]) == (7, 3)


def test_purge_a_compacted_topic_is_refused(op, broker):
    broker.store.create_topic("latest", 1, {"cleanup.policy": "compact"})
    err = error(op.post(f"{API}/topics/latest/purge", {"all": True}, format="json"), 400)
    assert err["code"] == "invalid_record" and "compact" in err["message"]


def test_names_with_dots_dashes_and_underscores_work_in_paths(op, broker):
    name = "shop.orders-v1_eu"
    assert op.post(f"{API}/topics", {"name": name}, format="json").status_code == 201
    assert op.get(f"{API}/topics/{name}").json()["name"] == name
    assert op.post(f"{API}/topics/{name}/records", {"value": "x"}, format="json").status_code == 201
    assert op.delete(f"{API}/topics/{name}").status_code == 204


def test_a_249_character_topic_is_created_and_deleted(op, broker):
    """Kafka's longest topic name used to give a 500 (ENAMETOOLONG)."""
    import os

    name = "api." + "x" * 245
    r = op.post(f"{API}/topics", {"name": name, "partitions": 2}, format="json")
    assert r.status_code == 201, r.content
    assert op.get(f"{API}/topics/{name}").json()["name"] == name
    assert op.delete(f"{API}/topics/{name}").status_code == 204
    left = [n for _, dirs, files in os.walk(broker.store.path) for n in dirs + files]
    assert [n for n in left if "xxxxxxxxxx" in n] == []


def test_describe_lists_a_partitions_damaged_ranges(view, broker):
    """Issue 10, item 5: a damaged range of the log is part of the partition's description."""
    from streams.errors import LogDamaged

    store = broker.store
    store.create_topic("dmg", 1, {"segment.bytes": "2048"})
    for i in range(40):
        store.append("dmg", b"value-%03d-" % i + b"x" * 30, partition=0)
    seg = store.partition_log("dmg", 0).segments[0]
    position = seg.position_of(3)
    with open(seg.path, "r+b") as f:
        f.seek(position + 45)
        byte = f.read(1)[0]
        f.seek(position + 45)
        f.write(bytes([byte ^ 0x10]))
    with pytest.raises(LogDamaged):
        store.read("dmg", 0, 3)
    part = view.get(f"{API}/topics/dmg").json()["partitions"][0]
    assert [(d["first_offset"], d["end_offset"], d["file"]) for d in part["damaged"]] == [
        (3, 4, "00000000000000000000.log")
    ]
    assert "CRC-32C mismatch" in part["damaged"][0]["reason"]
    r = view.get(f"{API}/topics/dmg/records", {"partition": 0, "offset": 3})
    assert r.status_code == 500 and r.json()["error"]["code"] == "log_damaged"
