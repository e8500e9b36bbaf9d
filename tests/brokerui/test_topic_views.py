"""The topic pages: list, detail, create, edit config, add partitions, purge, delete.

Every page renders; every change works, is audited (database and `__audit`) and is refused to
viewers (403) and anonymous users (login); bad input gets a clear message with a 200 or 4xx,
never a 500; unknown topics are 404s.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from django.urls import reverse

from brokerui.audit.models import AuditEntry

HX = {"HTTP_HX_REQUEST": "true"}


def url(name: str, *args) -> str:
    return reverse(f"console:{name}", args=args)


def html(response) -> str:
    return response.content.decode()


def audit_topic_entries(store) -> list[dict]:
    if "__audit" not in store.list_topics():
        return []
    return [json.loads(r.value) for r in store.read("__audit", 0, 0)]


def assert_audited(store, action: str, target: str) -> AuditEntry:
    entry = AuditEntry.objects.filter(action=action, target=target).latest("id")
    topic_entries = [
        e for e in audit_topic_entries(store) if e["action"] == action and e["target"] == target
    ]
    assert topic_entries, f"no {action} {target} in __audit"
    assert topic_entries[-1]["id"] == entry.pk
    return entry


def fill(store, topic: str, per_partition: dict[int, int], timestamp_ms: int | None = None):
    for p, n in per_partition.items():
        for i in range(n):
            store.append(
                topic,
                f"{topic}-{p}-{i}".encode(),
                key=f"k{i}".encode(),
                partition=p,
                timestamp_ms=timestamp_ms,
            )


@pytest.fixture
def orders(broker):
    """A topic `orders` with 3 partitions holding 5, 0 and 2 records."""
    broker.store.create_topic("orders", 3, {"retention.ms": "3600000"})
    fill(broker.store, "orders", {0: 5, 2: 2})
    return broker.store


# ====================================================================== list


def test_list_shows_topics_with_people_numbers(viewer_client, orders):
    orders.create_topic("big", 1)
    fill(orders, "big", {0: 1234})

    response = viewer_client.get(url("topics"))

    assert response.status_code == 200
    page = html(response)
    row = re.search(r'<tr data-topic="big">.*?</tr>', page, re.S).group(0)
    assert ">1,234<" in row and "KB" in row  # thousands separator, size unit
    assert "just now" in row or " s ago" in row  # last write, with the exact time on hover
    orders_row = re.search(r'<tr data-topic="orders">.*?</tr>', page, re.S).group(0)
    assert ">1 h<" in orders_row  # retention for people
    assert "__consumer_offsets" not in page  # internal topics hidden by default


def test_list_filter_toggle_sort_and_htmx_fragment(viewer_client, orders):
    orders.create_topic("order-events", 1)
    orders.create_topic("payments", 1)

    filtered = html(viewer_client.get(url("topics"), {"q": "ORDER"}))
    assert re.findall(r'data-topic="([^"]+)"', filtered) == ["order-events", "orders"]

    internal = html(viewer_client.get(url("topics"), {"internal": "1"}))
    assert 'data-topic="__consumer_offsets"' in internal

    by_records = html(viewer_client.get(url("topics"), {"sort": "records"}))
    assert re.findall(r'data-topic="([^"]+)"', by_records)[0] == "orders"

    fragment = viewer_client.get(url("topics"), {"q": "pay"}, **HX)
    assert "<html" not in html(fragment) and 'data-topic="payments"' in html(fragment)

    none = html(viewer_client.get(url("topics"), {"q": "<script>x"}))
    assert "<script>x" not in none and "&lt;script&gt;x" in none and "No topics match" in none


def test_list_pages_on_the_server(viewer_client, broker):
    for i in range(120):
        broker.store.create_topic(f"t{i:03d}", 1)

    first = html(viewer_client.get(url("topics")))
    second = html(viewer_client.get(url("topics"), {"page": "3"}))
    silly = viewer_client.get(url("topics"), {"page": "nonsense", "sort": "nonsense"})

    assert len(re.findall(r"<tr data-topic=", first)) == 50
    assert re.findall(r'data-topic="([^"]+)"', second) == [f"t{i:03d}" for i in range(100, 120)]
    assert "101–120 of 120 topics" in second
    assert silly.status_code == 200


def test_operator_sees_create_button_viewer_does_not(operator, viewer, broker):
    from django.test import Client

    as_operator, as_viewer = Client(), Client()
    as_operator.force_login(operator)
    as_viewer.force_login(viewer)
    assert url("topic_create") in html(as_operator.get(url("topics")))
    assert url("topic_create") not in html(as_viewer.get(url("topics")))


# ====================================================================== detail


def test_detail_partitions_config_groups_and_links(viewer_client, orders, broker):
    broker.coordinator.commit_offsets("billing", {("orders", 0): 1, ("orders", 2): 2})

    response = viewer_client.get(url("topic", "orders"))

    assert response.status_code == 200
    page = html(response)
    rows = re.findall(
        r'data-partition="(\d+)" data-end-offset="(\d+)" data-start-offset="(\d+)"', page
    )
    assert rows == [("0", "5", "0"), ("1", "0", "0"), ("2", "2", "0")]
    assert re.search(r'<tr class="override" data-config="retention.ms" data-override="1">', page)
    assert 'data-config="segment.bytes">' in page  # a default: not highlighted
    assert re.search(r'data-group="billing" data-lag="4"', page)  # 4 records behind on orders
    assert url("messages", "orders") in page
    # a viewer gets no buttons that change anything
    for name in ("topic_config", "topic_partitions", "topic_purge", "topic_delete", "produce"):
        assert url(name, "orders") not in page


def test_detail_offers_every_action_to_operators(operator_client, orders):
    page = html(operator_client.get(url("topic", "orders")))
    for name in (
        "topic_config",
        "topic_partitions",
        "topic_purge",
        "topic_delete",
        "produce",
        "messages",
    ):
        assert url(name, "orders") in page


def test_detail_shows_in_rate_of_the_last_minute(viewer_client, broker):
    broker.store.create_topic("live", 2)
    now = int(time.time() * 1000)
    fill(broker.store, "live", {0: 30}, timestamp_ms=now - 5_000)
    fill(broker.store, "live", {1: 10}, timestamp_ms=now - 3_600_000)  # an hour ago: not counted

    page = html(viewer_client.get(url("topic", "live")))

    kpi = re.search(
        r'<span class="kpi-value">([^<]+)</span><span class="kpi-label"[^>]*>records/s', page
    )
    assert kpi.group(1) == "0.50"  # 30 records in 60 s


def test_unknown_topic_is_404_everywhere(operator_client, broker):
    for name in ("topic", "topic_config", "topic_partitions", "topic_purge", "topic_delete"):
        response = operator_client.get(url(name, "no-such-topic"))
        assert response.status_code == 404, name
        assert "No topic named" in html(response)
        response = operator_client.post(url(name, "no-such-topic"), {"confirm": "x", "total": 3})
        assert response.status_code in (404, 405), name


# ====================================================================== create


def test_create_topic_with_presets_and_custom_configs(operator_client, broker):
    response = operator_client.post(
        url("topic_create"),
        {
            "name": "clicks",
            "partitions": "4",
            "cleanup_policy": "compact,delete",
            "retention_ms": "86400000",
            "retention_bytes": str(10 * 1024**3),
            "segment_bytes": "64 MB",
            "max_message_bytes": "",
            "configs": "# comment\ncompression.type = zstd\n\nmin.compaction.lag.ms=1h\n",
        },
    )

    assert response.status_code == 302 and response.url == url("topic", "clicks")
    d = broker.store.describe_topic("clicks")
    assert len(d.partitions) == 4
    assert d.overrides == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "86400000",
        "retention.bytes": str(10 * 1024**3),
        "segment.bytes": str(64 * 1024**2),
        "compression.type": "zstd",
        "min.compaction.lag.ms": "3600000",
    }
    entry = assert_audited(broker.store, "topic.create", "topic clicks")
    assert entry.username == "olivia" and entry.after["partitions"] == 4
    assert entry.after["config"]["compression.type"] == "zstd"
    follow = operator_client.get(response.url)
    assert "Created topic clicks with 4 partitions" in html(follow)


def test_create_defaults_make_no_overrides(operator_client, broker):
    response = operator_client.post(
        url("topic_create"),
        {
            "name": "plain",
            "partitions": "1",
            "cleanup_policy": "delete",
            "retention_ms": "604800000",
            "retention_bytes": "-1",
        },
    )
    assert response.status_code == 302
    assert broker.store.describe_topic("plain").overrides == {}


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"name": "bad name!"}, "name", "contains"),
        ({"name": ""}, "name", "required"),
        ({"name": "x" * 250}, "name", "the limit is 249"),
        ({"name": ".."}, "name", "cannot be"),
        ({"name": "__sneaky"}, "name", "reserved"),
        ({"name": "orders"}, "name", "already exists"),
        ({"partitions": "0"}, "partitions", "between 1 and"),
        ({"partitions": "many"}, "partitions", "whole number"),
        ({"cleanup_policy": "shred"}, "cleanup_policy", "valid choice"),
        ({"segment_bytes": "12"}, "segment_bytes", "must be between 1024"),
        ({"segment_bytes": "lots"}, "segment_bytes", "must be an integer"),
        ({"max_message_bytes": "-5"}, "max_message_bytes", "must be between 0"),
        ({"configs": "retention.msx=5"}, "configs", "did you mean retention.ms?"),
        ({"configs": "just words"}, "configs", "expected key=value"),
        ({"configs": "compression.type=zip"}, "configs", "must be one of"),
        ({"configs": "flush.ms=1\nflush.ms=2"}, "configs", "given twice"),
        ({"retention_ms": "3600000", "configs": "retention.ms=5"}, "configs", "one place"),
    ],
)
def test_create_refusals_show_next_to_the_field(operator_client, orders, data, field, message):
    form = {
        "name": "fresh",
        "partitions": "2",
        "cleanup_policy": "delete",
        "retention_ms": "604800000",
        "retention_bytes": "-1",
        "segment_bytes": "8 MB",
    }
    form.update(data)

    response = operator_client.post(url("topic_create"), form)

    assert response.status_code == 200
    page = html(response)
    msg = re.search(
        rf'<small id="{field}-msg" class="field-msg field-error"[^>]*>(.*?)</small>', page, re.S
    )
    assert msg, f"no error next to {field}"
    assert message in msg.group(1)
    assert 'value="8 MB"' in page or "segment_bytes" in data  # what the user typed stays
    assert "fresh" not in orders.list_topics()
    assert not AuditEntry.objects.filter(action="topic.create").exists()


def test_create_escapes_what_the_user_typed(operator_client, broker):
    response = operator_client.post(
        url("topic_create"),
        {
            "name": "<b>x</b>",
            "partitions": "1",
            "cleanup_policy": "delete",
            "retention_ms": "604800000",
            "retention_bytes": "-1",
            "configs": "compression.type=<script>alert(1)</script>",
        },
    )
    page = html(response)
    assert response.status_code == 200
    assert "<script>alert(1)" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)" in page


def test_create_live_check_answers_for_one_field(operator_client, orders):
    base = {
        "partitions": "1",
        "cleanup_policy": "delete",
        "retention_ms": "604800000",
        "retention_bytes": "-1",
    }
    taken = operator_client.post(
        url("topic_create"), {**base, "name": "orders", "_check": "name"}, **HX
    )
    free = operator_client.post(
        url("topic_create"), {**base, "name": "new-one", "_check": "name"}, **HX
    )
    config = operator_client.post(
        url("topic_create"),
        {**base, "name": "", "_check": "configs", "configs": "segment.bytes=1"},
        **HX,
    )

    assert taken.status_code == 200 and "already exists" in html(taken)
    assert html(taken).startswith('<small id="name-msg" class="field-msg field-error"')
    assert "field-ok" in html(free) and "new-one" in html(free)
    assert "must be between 1024" in html(config) and "required" not in html(config)
    assert "new-one" not in orders.list_topics()


# ====================================================================== config


def test_edit_config_sets_and_resets_with_audit(operator_client, orders):
    page = html(operator_client.get(url("topic_config", "orders")))
    assert 'name="retention.ms" value="3600000"' in page

    response = operator_client.post(
        url("topic_config", "orders"),
        {
            "retention.ms": "",
            "segment.bytes": "16 MB",
            "cleanup.policy": "compact,delete",
        },
    )

    assert response.status_code == 302
    assert orders.describe_topic("orders").overrides == {
        "segment.bytes": str(16 * 1024**2),
        "cleanup.policy": "compact,delete",
    }
    entry = assert_audited(orders, "topic.config", "topic orders")
    assert entry.before == {"retention.ms": "3600000"}
    assert entry.after == {"segment.bytes": "16777216", "cleanup.policy": "compact,delete"}
    assert "retention.ms reset" in html(operator_client.get(response.url))


def test_edit_config_reset_checkbox_wins(operator_client, orders):
    response = operator_client.post(
        url("topic_config", "orders"), {"retention.ms": "3600000", "reset": ["retention.ms"]}
    )
    assert response.status_code == 302
    assert orders.describe_topic("orders").overrides == {}


def test_edit_config_refusal_changes_nothing(operator_client, orders):
    response = operator_client.post(
        url("topic_config", "orders"),
        {"retention.ms": "2h", "segment.bytes": "tiny", "min.cleanable.dirty.ratio": "7"},
    )

    assert response.status_code == 200
    page = html(response)
    assert "Nothing was changed" in page
    assert "segment.bytes: must be an integer" in page
    assert "min.cleanable.dirty.ratio: must be between 0 and 1" in page
    assert 'value="tiny"' in page and 'value="2h"' in page
    assert orders.describe_topic("orders").overrides == {"retention.ms": "3600000"}
    assert not AuditEntry.objects.filter(action="topic.config").exists()


def test_edit_config_without_changes_says_so(operator_client, orders):
    response = operator_client.post(
        url("topic_config", "orders"), {"retention.ms": "1h"}, follow=True
    )
    assert "Nothing changed." in html(response)
    assert not AuditEntry.objects.filter(action="topic.config").exists()


def test_edit_config_live_check(operator_client, orders):
    bad = operator_client.post(
        url("topic_config", "orders"), {"segment.bytes": "1", "_check": "segment.bytes"}, **HX
    )
    good = operator_client.post(
        url("topic_config", "orders"), {"segment.bytes": "1 GB", "_check": "segment.bytes"}, **HX
    )
    assert "must be between 1024" in html(bad) and "field-error" in html(bad)
    assert "field-error" not in html(good) and "must be" not in html(good)


# ====================================================================== partitions


def test_add_partitions_with_audit(operator_client, orders):
    assert operator_client.get(url("topic_partitions", "orders")).status_code == 200

    response = operator_client.post(url("topic_partitions", "orders"), {"total": "5"})

    assert response.status_code == 302
    assert orders.partition_count("orders") == 5
    entry = assert_audited(orders, "topic.add_partitions", "topic orders")
    assert (entry.before, entry.after) == ({"partitions": 3}, {"partitions": 5})


@pytest.mark.parametrize(
    ("total", "message"),
    [
        ("2", "never removed"),
        ("3", "already has 3 partitions"),
        ("0", "between 1 and"),
        ("x", "whole number"),
        ("", "required"),
    ],
)
def test_add_partitions_refused_with_the_reason(operator_client, orders, total, message):
    response = operator_client.post(url("topic_partitions", "orders"), {"total": total})
    assert response.status_code == 200
    assert message in html(response)
    assert orders.partition_count("orders") == 3


# ====================================================================== delete


def test_delete_needs_the_typed_name(operator_client, orders, broker):
    broker.coordinator.commit_offsets("billing", {("orders", 0): 1})
    page = html(operator_client.get(url("topic_delete", "orders")))
    assert "billing" in page and 'name="confirm"' in page

    for typed in ("", "order", "ORDERS", "orders "[:-1] + "s"):
        response = operator_client.post(url("topic_delete", "orders"), {"confirm": typed})
        assert response.status_code == 200
        assert "type the topic name exactly" in html(response) or "required" in html(response)
    assert "orders" in orders.list_topics()

    response = operator_client.post(url("topic_delete", "orders"), {"confirm": "orders"})

    assert response.status_code == 302 and response.url == url("topics")
    assert "orders" not in orders.list_topics()
    entry = assert_audited(orders, "topic.delete", "topic orders")
    assert entry.before["records"] == 7 and entry.before["partitions"] == 3
    assert entry.after is None


# ====================================================================== purge


def test_purge_before_an_offset_in_all_partitions(operator_client, orders):
    assert operator_client.get(url("topic_purge", "orders")).status_code == 200

    response = operator_client.post(
        url("topic_purge", "orders"), {"partition": "all", "mode": "offset", "offset": "3"}
    )

    assert response.status_code == 302
    starts = [p.log_start_offset for p in orders.describe_topic("orders").partitions]
    assert starts == [3, 0, 2]  # clamped to each partition's end
    entry = assert_audited(orders, "topic.purge", "topic orders")
    assert entry.before == {"log_start_offsets": {"0": 0, "1": 0, "2": 0}}
    assert entry.after["records_deleted"] == 5
    assert "Purged 5 records from orders (all partitions)" in html(
        operator_client.get(response.url)
    )


def test_purge_one_partition_everything(operator_client, orders):
    response = operator_client.post(url("topic_purge", "orders"), {"partition": "0", "mode": "all"})
    assert response.status_code == 302
    starts = [p.log_start_offset for p in orders.describe_topic("orders").partitions]
    assert starts == [5, 0, 0]
    entry = assert_audited(orders, "topic.purge", "topic orders")
    assert entry.after["request"] == {"partition": 0, "mode": "all"}


def test_purge_before_a_time(operator_client, broker):
    broker.store.create_topic("events", 1)
    fill(broker.store, "events", {0: 3}, timestamp_ms=1_700_000_000_000)  # 2023-11-14 22:13:20
    fill(broker.store, "events", {0: 2}, timestamp_ms=1_800_000_000_000)

    response = operator_client.post(
        url("topic_purge", "events"),
        {"partition": "all", "mode": "timestamp", "timestamp": "2024-01-01 00:00:00"},
    )

    assert response.status_code == 302
    assert broker.store.offsets("events", 0) == (3, 5)
    assert "Purged 3 records" in html(operator_client.get(response.url))


def test_purge_preview_counts_before_anything_goes(operator_client, orders):
    response = operator_client.post(
        url("topic_purge", "orders"),
        {"partition": "all", "mode": "offset", "offset": "4", "_preview": "1"},
        **HX,
    )

    assert response.status_code == 200
    assert "<strong>6</strong> records would be deleted" in html(response)
    assert [p.log_start_offset for p in orders.describe_topic("orders").partitions] == [0, 0, 0]
    assert not AuditEntry.objects.filter(action="topic.purge").exists()


def test_purge_of_a_compacted_topic_gives_the_engines_reason(operator_client, broker):
    broker.store.create_topic("profiles", 1, {"cleanup.policy": "compact"})
    fill(broker.store, "profiles", {0: 3})
    assert "cleanup.policy=compact" in html(operator_client.get(url("topic_purge", "profiles")))

    response = operator_client.post(
        url("topic_purge", "profiles"), {"partition": "all", "mode": "all"}
    )

    assert response.status_code == 200
    assert "tombstones" in html(response) and "compact,delete" in html(response)
    assert broker.store.offsets("profiles", 0) == (0, 3)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"partition": "7", "mode": "all"}, "between 0 and 2"),
        ({"partition": "-1", "mode": "all"}, "between 0 and 2"),
        ({"partition": "all", "mode": "offset", "offset": ""}, "enter the offset"),
        ({"partition": "all", "mode": "offset", "offset": "-3"}, "greater than or equal to 0"),
        ({"partition": "all", "mode": "timestamp", "timestamp": "yesterday"}, "enter a UTC time"),
        ({"partition": "all", "mode": "explode"}, "valid choice"),
    ],
)
def test_purge_bad_input(operator_client, orders, data, message):
    response = operator_client.post(url("topic_purge", "orders"), data)
    assert response.status_code == 200
    assert message in html(response)
    assert [p.log_start_offset for p in orders.describe_topic("orders").partitions] == [0, 0, 0]


# ====================================================================== permissions

MUTATING = ["topic_config", "topic_partitions", "topic_purge", "topic_delete"]


def test_viewers_get_403_on_every_mutating_url(viewer_client, orders):
    for name in MUTATING:
        assert viewer_client.get(url(name, "orders")).status_code == 403, name
        response = viewer_client.post(
            url(name, "orders"),
            {
                "confirm": "orders",
                "total": "9",
                "partition": "all",
                "mode": "all",
                "retention.ms": "1",
            },
        )
        assert response.status_code == 403, name
    assert viewer_client.get(url("topic_create")).status_code == 403
    assert (
        viewer_client.post(
            url("topic_create"),
            {
                "name": "sneaky",
                "partitions": "1",
                "cleanup_policy": "delete",
                "retention_ms": "604800000",
                "retention_bytes": "-1",
            },
        ).status_code
        == 403
    )
    assert orders.list_topics(include_internal=False) == ["orders"]
    assert orders.partition_count("orders") == 3
    assert orders.describe_topic("orders").overrides == {"retention.ms": "3600000"}
    assert orders.offsets("orders", 0) == (0, 5)
    assert not AuditEntry.objects.exists()


def test_anonymous_users_are_sent_to_log_in(client, orders):
    pages = [
        url("home"),
        url("topics"),
        url("topic_create"),
        url("topic", "orders"),
        *[url(name, "orders") for name in MUTATING],
    ]
    for page in pages:
        for method in (client.get, client.post):
            response = method(page)
            assert response.status_code == 302, page
            assert response.url.startswith(reverse("login")), page
    assert orders.list_topics(include_internal=False) == ["orders"]


def test_internal_topics_cannot_be_changed_from_the_console(operator_client, broker):
    page = html(operator_client.get(url("topic", "__consumer_offsets")))
    assert url("topic_delete", "__consumer_offsets") not in page
    assert "internal topic" in page
    for name in MUTATING:
        response = operator_client.post(
            url(name, "__consumer_offsets"),
            {"confirm": "__consumer_offsets", "mode": "all", "partition": "all", "total": "60"},
        )
        assert response.status_code == 403, name
        assert "is an internal topic" in html(response)
    assert "__consumer_offsets" in broker.store.list_topics()


def test_every_form_carries_a_csrf_token(operator_client, orders):
    for page in [url("topic_create"), *[url(name, "orders") for name in MUTATING]]:
        body = html(operator_client.get(page))
        forms = re.findall(r'<form method="post".*?</form>', body, re.S)
        assert forms, page
        assert all("csrfmiddlewaretoken" in f for f in forms), page


def test_csrf_is_enforced(orders, operator):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    response = strict.post(url("topic_delete", "orders"), {"confirm": "orders"})
    assert response.status_code == 403
    assert "orders" in orders.list_topics()


# ====================================================================== long names (issue 10)

CREATE = {
    "partitions": "2",
    "cleanup_policy": "delete",
    "retention_ms": "86400000",
    "retention_bytes": "-1",
}


@pytest.mark.parametrize("length", [247, 249])
def test_topics_with_kafkas_longest_names_work_in_the_console(operator_client, broker, length):
    """Names of 247..249 characters (Kafka's limit) used to give a 500 (ENAMETOOLONG on the
    metadata temp file) and leave partition directories behind."""
    name = ("long." + "n" * length)[:length]
    response = operator_client.post(url("topic_create"), {**CREATE, "name": name})
    assert response.status_code == 302 and response.url == url("topic", name)
    assert name in html(operator_client.get(response.url))
    assert_audited(broker.store, "topic.create", f"topic {name}")

    response = operator_client.post(url("topic_delete", name), {"confirm": name})
    assert response.status_code == 302
    assert name not in broker.store.list_topics()
    assert [n for n in os_names(broker.store.path) if "nnnnnnnnnn" in n] == []


def test_a_250_character_name_is_refused_next_to_the_field(operator_client, broker):
    name = "n" * 250
    response = operator_client.post(url("topic_create"), {**CREATE, "name": name})
    assert response.status_code == 200
    assert "250 characters long; the limit is 249" in html(response)
    assert [n for n in os_names(broker.store.path) if "nnnnnnnnnn" in n] == []


def os_names(path) -> list[str]:
    import os

    return [n for _, dirs, files in os.walk(path) for n in dirs + files]


# ====================================================================== damaged log (issue 10)


def test_detail_shows_a_damaged_partition_and_how_to_repair_it(viewer_client, broker):
    from streams.errors import LogDamaged

    store = broker.store
    store.create_topic("dmg", 2, {"segment.bytes": "2048"})
    for i in range(60):
        store.append("dmg", b"value-%03d-" % i + b"x" * 30, partition=1)
    plog = store.partition_log("dmg", 1)
    page = html(viewer_client.get(url("topic", "dmg")))
    assert 'id="log-damage"' not in page and ">damaged<" not in page

    seg = plog.segments[0]  # closed; one record per batch: the third batch is offset 2
    position = seg.position_of(2)
    with open(seg.path, "r+b") as f:
        f.seek(position + 40)
        byte = f.read(1)[0]
        f.seek(position + 40)
        f.write(bytes([byte ^ 0xFF]))
    with pytest.raises(LogDamaged):
        store.read("dmg", 1, 2)  # a consumer meets it: recorded

    page = html(viewer_client.get(url("topic", "dmg")))
    assert 'id="log-damage"' in page and "Damaged log in 1 partition" in page
    assert 'data-damaged-partition="1"' in page and "offset 2</span> in" in page
    assert f"{seg.base_offset:020d}.log" in page and "CRC-32C mismatch" in page
    assert "manage.py verify_log --topic dmg --repair" in page
    row = re.search(r'<tr data-partition="1".*?</tr>', page, re.S).group(0)
    assert ">damaged<" in row
    row0 = re.search(r'<tr data-partition="0".*?</tr>', page, re.S).group(0)
    assert ">damaged<" not in row0
