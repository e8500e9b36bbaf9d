"""Consumer groups: list, describe, reset (preview and execute), delete, delete offsets."""

from __future__ import annotations

import datetime as dt

import pytest

from brokerui.audit.models import AuditEntry
from tests.api.conftest import API
from tests.api.test_topics import error

RESET = f"{API}/groups/billing/reset"


def committed(broker, group="billing") -> dict:
    return {tp: c.offset for tp, c in broker.coordinator.committed(group).items()}


def rows(body) -> list[tuple]:
    return [
        (r["topic"], r["partition"], r["current_offset"], r["new_offset"]) for r in body["rows"]
    ]


# ------------------------------------------------------------------------- list, describe


def test_list_groups(view, billing, broker):
    broker.coordinator.commit_offsets("audit-reader", {("orders", 2): 30})
    body = view.get(f"{API}/groups").json()
    assert body["count"] == 2
    assert body["groups"] == [
        {
            "group_id": "audit-reader",
            "state": "Empty",
            "members": 0,
            "topics": ["orders"],
            "total_lag": 0,
            "fallen_behind": 0,
        },
        {
            "group_id": "billing",
            "state": "Empty",
            "members": 0,
            "topics": ["orders"],
            "total_lag": 5,
            "fallen_behind": 0,
        },
    ]


def test_describe_a_group_with_a_member(view, live_member):
    body = view.get(f"{API}/groups/billing").json()
    assert body["group_id"] == "billing" and body["state"] != "Empty"
    assert [
        (m["member_id"], m["client_id"], m["host"], m["subscription"]) for m in body["members"]
    ] == [(live_member, "worker", "10.0.0.7", ["orders"])]
    assert body["total_lag"] == 5
    lag = {
        (p["topic"], p["partition"]): (p["committed_offset"], p["end_offset"], p["lag"])
        for p in body["partitions"]
    }
    assert lag == {("orders", 0): (5, 10, 5), ("orders", 1): (20, 20, 0)}


def test_describe_only_lagging_partitions_and_fallen_behind(view, billing, broker):
    broker.store.delete_records("orders", {0: 7})  # billing's offset 5 is gone
    body = view.get(f"{API}/groups/billing", {"lagging": "true"}).json()
    assert [
        (p["partition"], p["lag"], p["fallen_behind_retention"]) for p in body["partitions"]
    ] == [(0, 3, True)]
    assert body["total_lag"] == 3


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("get", "/groups/ghost", None),
        ("delete", "/groups/ghost", None),
        ("delete", "/groups/ghost/offsets/orders", None),
    ],
)
def test_unknown_group_is_404(op, orders, method, path, body):
    err = error(getattr(op, method)(API + path, body, format="json"), 404)
    assert err["code"] == "unknown_group" and err["group"] == "ghost"


# --------------------------------------------------------------------------------- reset


def test_reset_values_are_kebab_case_and_the_old_scope_spelling_still_works(
    op, view, billing, broker, caplog
):
    """Values are spelled as Kafka's flags (to-earliest, all-topics); all_topics, the spelling
    before, is a deprecated alias: the same plan, and a warning in the server's log."""
    new = op.post(RESET, {"strategy": "to-earliest", "scope": "all-topics"}, format="json")
    assert new.status_code == 200, new.json()
    with caplog.at_level("WARNING", logger="brokerui.api.serializers"):
        old = op.post(RESET, {"strategy": "to-earliest", "scope": "all_topics"}, format="json")
    assert old.status_code == 200 and rows(old.json()) == rows(new.json())
    assert "'all_topics' is a deprecated spelling; send 'all-topics'" in caplog.text
    executed = op.post(
        RESET, {"strategy": "to-earliest", "scope": "all-topics", "dry_run": False}, format="json"
    )
    assert executed.json()["executed"] and committed(broker) == {("orders", 0): 0, ("orders", 1): 0}
    err = error(op.post(RESET, {"strategy": "to-earliest", "scope": "all"}, format="json"), 400)
    assert "all-topics" in str(err)  # the choices offered are the current spelling
    schema = view.get(f"{API}/schema", {"format": "json"}).json()
    scope = schema["components"]["schemas"]["ResetRequest"]["properties"]["scope"]
    enum = (
        scope.get("enum")
        or schema["components"]["schemas"][scope["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"]
    )
    assert enum == ["all-topics", "topic", "partitions"]


def test_reset_is_a_dry_run_by_default(op, billing, broker):
    r = op.post(RESET, {"strategy": "to-earliest", "scope": "all_topics"}, format="json")
    assert r.status_code == 200
    body = r.json()
    assert (body["dry_run"], body["executed"], body["executable"]) == (True, False, True)
    assert body["blocked_reason"] is None and body["group_state"] == "Empty"
    assert body["strategy"] == "to-earliest"
    assert rows(body) == [("orders", 0, 5, 0), ("orders", 1, 20, 0)]
    assert (body["total_replay"], body["total_skip"]) == (25, 0)
    assert body["rows"][0] == {
        "topic": "orders",
        "partition": 0,
        "current_offset": 5,
        "requested_offset": 0,
        "new_offset": 0,
        "log_start_offset": 0,
        "end_offset": 10,
        "clamped": None,
        "records_to_replay": 5,
        "records_to_skip": 0,
        "changes": True,
    }
    assert committed(broker) == {("orders", 0): 5, ("orders", 1): 20}
    assert not AuditEntry.objects.exists()


def test_reset_executes_and_audits(op, billing, broker):
    r = op.post(
        RESET,
        {
            "strategy": "to-offset",
            "value": 8,
            "scope": "topic",
            "topic": "orders",
            "dry_run": False,
        },
        format="json",
    )
    body = r.json()
    assert r.status_code == 200 and body["executed"] is True
    assert rows(body) == [("orders", 0, 5, 8), ("orders", 1, 20, 8), ("orders", 2, None, 8)]
    assert committed(broker) == {("orders", 0): 8, ("orders", 1): 8, ("orders", 2): 8}
    entry = AuditEntry.objects.get(action="group.reset")
    assert entry.source == "api" and entry.target == "group billing"
    assert entry.before == {"offsets": {"orders": {"0": 5, "1": 20, "2": None}}}
    assert entry.after == {
        "strategy": "to-offset 8",
        "offsets": {"orders": {"0": 8, "1": 8, "2": 8}},
    }


def test_reset_clamps_and_says_why(op, billing):
    body = op.post(
        RESET,
        {
            "strategy": "to-offset",
            "value": "15",
            "scope": "partitions",
            "topic": "orders",
            "partitions": [0],
        },
        format="json",
    ).json()
    assert rows(body) == [("orders", 0, 5, 10)]
    assert body["rows"][0]["requested_offset"] == 15
    assert "past the log end offset 10" in body["rows"][0]["clamped"]


@pytest.mark.parametrize(
    "strategy, value, expected",
    [
        ("to-latest", None, [10, 20]),
        ("to-current", None, [5, 20]),
        ("shift-by", "-3", [2, 17]),
        ("--shift-by", 2, [7, 20]),
        ("to-datetime", "T0+4s", [4, 0]),
        ("to-datetime", "T0ms+104000", [10, 4]),
        ("by-duration", "PT0S", [10, 20]),
    ],
)
def test_every_strategy(op, billing, strategy, value, expected):
    t0 = billing and 1_700_000_000_000
    if value == "T0+4s":
        value = dt.datetime.fromtimestamp(t0 / 1000 + 4, dt.UTC).isoformat()
    elif value == "T0ms+104000":
        value = str(t0 + 104_000)
    body = op.post(
        RESET, {"strategy": strategy, "value": value, "scope": "all_topics"}, format="json"
    ).json()
    assert [r["new_offset"] for r in body["rows"]] == expected, body


def test_from_file_takes_csv_text_not_a_server_path(op, billing, broker):
    csv = "topic,partition,offset\norders,0,3\norders,2,29\n"
    body = op.post(
        RESET, {"strategy": "from-file", "value": csv, "dry_run": False}, format="json"
    ).json()
    assert rows(body) == [("orders", 0, 5, 3), ("orders", 2, None, 29)]
    assert committed(broker)[("orders", 2)] == 29

    err = error(
        op.post(RESET, {"strategy": "from-file", "value": "/etc/passwd"}, format="json"), 400
    )
    assert err["code"] == "invalid_reset" and "root:" not in err["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"strategy": "to-the-moon", "scope": "all_topics"},
        {"strategy": "to-offset", "scope": "all_topics"},
        {"strategy": "to-offset", "value": "-1", "scope": "all_topics"},
        {"strategy": "shift-by", "value": "lots", "scope": "all_topics"},
        {"strategy": "to-datetime", "value": "yesterday", "scope": "all_topics"},
        {"strategy": "by-duration", "value": "1 hour", "scope": "all_topics"},
        {"strategy": "from-file", "value": "orders;0;3"},
    ],
)
def test_invalid_reset_specs(op, billing, body):
    err = error(op.post(RESET, body, format="json"), 400)
    assert err["code"] == "invalid_reset"


@pytest.mark.parametrize(
    "strategy, value",
    [
        ("to-datetime", str(2**80)),
        ("to-datetime", str(-(2**80))),
        ("to-datetime", "9" * 5000),
        ("to-datetime", "0001-01-01T00:00:00+05:00"),
        ("by-duration", "PT" + "9" * 400 + "S"),
        ("by-duration", "P" + "9" * 5000 + "D"),
        ("by-duration", f"PT{2**80}S"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_moments_and_durations_no_clock_holds_are_400(
    op, billing, broker, strategy, value, dry_run
):
    """A to-datetime of 2^80 ms was a 500 (OverflowError); it is bad input, as in the console."""
    body = {"strategy": strategy, "value": value, "scope": "all_topics", "dry_run": dry_run}
    err = error(op.post(RESET, body, format="json"), 400)
    assert err["code"] == "invalid_reset"
    assert "out of range" in err["message"] or "can hold" in err["message"]
    assert committed(broker) == {("orders", 0): 5, ("orders", 1): 20}


def test_shift_by_needs_a_committed_offset(op, billing):
    r = op.post(
        RESET,
        {"strategy": "shift-by", "value": 1, "scope": "topic", "topic": "orders"},
        format="json",
    )
    assert error(r, 400)["code"] == "invalid_reset"


def test_all_topics_of_a_group_without_offsets(op, orders):
    r = op.post(
        f"{API}/groups/newbie/reset",
        {"strategy": "to-earliest", "scope": "all_topics"},
        format="json",
    )
    assert error(r, 400)["code"] == "invalid_reset"


def test_reset_a_new_group_by_topic_creates_offsets(op, orders, broker):
    r = op.post(
        f"{API}/groups/newbie/reset",
        {"strategy": "to-latest", "scope": "topic", "topic": "orders", "dry_run": False},
        format="json",
    )
    assert r.status_code == 200
    assert committed(broker, "newbie") == {("orders", 0): 10, ("orders", 1): 20, ("orders", 2): 30}


@pytest.mark.parametrize(
    "body, field",
    [
        ({"scope": "all_topics"}, "strategy"),
        ({"strategy": "to-earliest"}, "scope"),
        ({"strategy": "to-earliest", "scope": "everything"}, "scope"),
        ({"strategy": "to-earliest", "scope": "topic"}, "topic"),
        ({"strategy": "to-earliest", "scope": "partitions", "topic": "orders"}, "partitions"),
        ({"strategy": "to-earliest", "scope": "all_topics", "topic": "orders"}, "topic"),
        (
            {"strategy": "to-earliest", "scope": "topic", "topic": "orders", "partitions": [0]},
            "partitions",
        ),
        ({"strategy": "from-file", "value": "orders,0,1", "scope": "all_topics"}, "scope"),
        ({"strategy": "to-earliest", "scope": "all_topics", "dry_run": "perhaps"}, "dry_run"),
        ({"strategy": "to-earliest", "scope": "all_topics", "dryrun": False}, "dryrun"),
    ],
)
def test_malformed_reset_requests(op, billing, broker, body, field):
    err = error(op.post(RESET, body, format="json"), 400)
    assert err["code"] == "invalid_request" and field in err["fields"]
    assert committed(broker) == {("orders", 0): 5, ("orders", 1): 20}


def test_reset_an_unknown_topic_or_partition(op, billing):
    err = error(
        op.post(
            RESET, {"strategy": "to-earliest", "scope": "topic", "topic": "nope"}, format="json"
        ),
        404,
    )
    assert (err["code"], err["topic"]) == ("unknown_topic", "nope")
    err = error(
        op.post(
            RESET,
            {
                "strategy": "to-earliest",
                "scope": "partitions",
                "topic": "orders",
                "partitions": [0, 5],
            },
            format="json",
        ),
        404,
    )
    assert (err["code"], err["partition"], err["partition_count"]) == ("unknown_partition", 5, 3)


def test_reset_preview_of_a_busy_group_is_not_executable(op, live_member):
    body = op.post(RESET, {"strategy": "to-earliest", "scope": "all_topics"}, format="json").json()
    assert body["executable"] is False and "not Empty" in body["blocked_reason"]


def test_executing_a_reset_on_a_busy_group_is_409_with_members(op, live_member, broker):
    r = op.post(
        RESET, {"strategy": "to-earliest", "scope": "all_topics", "dry_run": False}, format="json"
    )
    err = error(r, 409)
    assert err["code"] == "group_not_empty" and err["group"] == "billing"
    assert err["members"] == [live_member] and err["state"] != "Empty"
    assert live_member in err["message"]
    assert committed(broker) == {("orders", 0): 5, ("orders", 1): 20}
    assert not AuditEntry.objects.filter(action="group.reset").exists()


# -------------------------------------------------------------------------------- delete


def test_delete_a_group(op, billing, broker):
    r = op.delete(f"{API}/groups/billing")
    assert r.status_code == 204
    assert "billing" not in dict(broker.coordinator.list_groups())
    entry = AuditEntry.objects.get(action="group.delete")
    assert entry.source == "api" and entry.target == "group billing"
    assert entry.before == {"offsets": {"orders": {"0": 5, "1": 20}}}
    assert error(op.get(f"{API}/groups/billing"), 404)["code"] == "unknown_group"


def test_delete_a_busy_group_is_409(op, live_member, broker):
    err = error(op.delete(f"{API}/groups/billing"), 409)
    assert err["code"] == "group_not_empty" and err["members"] == [live_member]
    assert committed(broker)


def test_delete_offsets_for_a_topic(op, billing, broker):
    broker.store.create_topic("audit", 1)
    broker.coordinator.commit_offsets("billing", {("audit", 0): 0})
    r = op.delete(f"{API}/groups/billing/offsets/orders")
    assert r.status_code == 200
    assert r.json() == {
        "group_id": "billing",
        "topic": "orders",
        "deleted": [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}],
    }
    assert committed(broker) == {("audit", 0): 0}
    entry = AuditEntry.objects.get(action="group.offsets.delete")
    assert entry.before == {"topic": "orders", "offsets": {"orders": {"0": 5, "1": 20}}}


def test_delete_offsets_of_an_unknown_topic(op, billing):
    err = error(op.delete(f"{API}/groups/billing/offsets/nope"), 404)
    assert (err["code"], err["topic"]) == ("unknown_topic", "nope")


def test_delete_offsets_while_members_read_the_topic_is_409(op, live_member, broker):
    err = error(op.delete(f"{API}/groups/billing/offsets/orders"), 409)
    assert err["code"] == "group_not_empty" and err["members"] == [live_member]
    assert committed(broker) == {("orders", 0): 5, ("orders", 1): 20}
