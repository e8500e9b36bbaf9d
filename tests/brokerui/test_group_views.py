"""Consumer group pages: list, detail, delete, and the interactive offset reset (preview → CSV →
apply → result), with the Empty rule, the race between preview and apply, roles and audit."""

from __future__ import annotations

import datetime as dt
import html as htmllib
import re
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from streams.groups.schemas import Assignment, Subscription

MINUTE = 60_000
HX = {"HTTP_HX_REQUEST": "true"}
SIZES = {0: 10, 1: 20, 2: 30}  # records per partition of "orders"
BILLING = {("orders", 0): 5, ("orders", 1): 20, ("payments", 0): 2}


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture
def base_ms():
    """Timestamp of every partition's first record: an hour ago, one record a minute."""
    return int(time.time() * 1000) - 60 * MINUTE


@pytest.fixture
def cluster(broker, base_ms):
    """orders (3 partitions: 10, 20, 30 records), payments (1: 5 records); group "billing"
    Empty with committed offsets (orders-0 at 5, orders-1 at 20, payments-0 at 2)."""
    store = broker.store
    store.create_topic("orders", partitions=3)
    store.create_topic("payments", partitions=1)
    for p, n in SIZES.items():
        for i in range(n):
            store.append(
                "orders", f"o{p}-{i}".encode(), partition=p, timestamp_ms=base_ms + i * MINUTE
            )
    for i in range(5):
        store.append("payments", f"p{i}".encode(), partition=0, timestamp_ms=base_ms + i * MINUTE)
    broker.coordinator.commit_offsets("billing", dict(BILLING))
    return broker


def join(coordinator, group: str, client_id: str, topics=("orders",), member_id: str = ""):
    return coordinator.join_group(
        group,
        member_id,
        client_id=client_id,
        host=f"/10.0.0.{len(client_id)}",
        session_timeout_ms=60_000,
        rebalance_timeout_ms=60_000,
        protocols=[("range", Subscription(tuple(topics)).encode())],
    )


def active_member(coordinator, group: str, client_id: str = "app-1", partitions=(0, 1, 2)):
    """One Stable member assigned `partitions` of orders; returns its member id."""
    r = join(coordinator, group, client_id).result(5)
    coordinator.sync_group(
        group,
        r.generation,
        r.member_id,
        {r.member_id: Assignment({"orders": list(partitions)}).encode()},
    ).result(5)
    return r.member_id


def two_members_one_idle(coordinator, group: str) -> tuple[str, str]:
    """app-1 gets every partition of orders; app-2 gets nothing (idle)."""
    a = join(coordinator, group, "app-1").result(5)
    coordinator.sync_group(group, a.generation, a.member_id, {a.member_id: b""}).result(5)
    fb = join(coordinator, group, "app-2")
    fa = join(coordinator, group, "app-1", member_id=a.member_id)
    ra, rb = fa.result(5), fb.result(5)
    leader, other = (ra, rb) if ra.is_leader else (rb, ra)
    plan = {
        ra.member_id: Assignment({"orders": [0, 1, 2]}).encode(),
        rb.member_id: Assignment({}).encode(),
    }
    pending = coordinator.sync_group(group, other.generation, other.member_id)
    coordinator.sync_group(group, leader.generation, leader.member_id, plan).result(5)
    pending.result(5)
    return ra.member_id, rb.member_id


def committed(broker, group: str = "billing") -> dict[tuple[str, int], int]:
    return {tp: c.offset for tp, c in broker.coordinator.committed(group).items()}


def text(response) -> str:
    return response.content.decode()


def plan_rows(html: str) -> dict[tuple[str, int], int]:
    """{(topic, partition): target} from a preview table."""
    rows = re.findall(
        r'<tr data-topic="([^"]+)" data-partition="(\d+)" data-current="[^"]*" '
        r'data-target="(\d+)"',
        html,
    )
    return {(t, int(p)): int(target) for t, p, target in rows}


def token_of(html: str) -> str:
    m = re.search(r'name="plan" value="([^"]+)"', html)
    assert m, "no plan in the preview"
    return htmllib.unescape(m.group(1))


def preview(client, group="billing", htmx=True, files=None, **fields):
    data = {"action": "preview", "scope": "all", **fields}
    if files:
        data.update(files)
    return client.post(reverse("console:group_reset", args=[group]), data, **(HX if htmx else {}))


def apply(client, token, group="billing", htmx=True):
    return client.post(
        reverse("console:group_reset", args=[group]),
        {"action": "apply", "plan": token},
        **(HX if htmx else {}),
    )


# ------------------------------------------------------------------------------ list


def test_list_shows_state_members_topics_and_lag(viewer_client, cluster):
    active_member(cluster.coordinator, "live")
    response = viewer_client.get(reverse("console:groups"))
    assert response.status_code == 200
    html = text(response)
    billing = re.search(r'<tr data-group="billing" data-state="(\w+)" data-lag="(\d+)"', html)
    assert billing.groups() == ("Empty", str(5 + 0 + 3))  # 10-5, 20-20, 5-2
    assert re.search(r'data-group="live" data-state="Stable"', html)
    assert reverse("console:group", args=["billing"]) in html
    row = re.search(r'data-group="billing".*?</tr>', html, re.S).group(0)
    assert "orders" in row and "payments" in row


def test_list_filters_by_name_and_state_and_polls_as_a_partial(viewer_client, cluster):
    active_member(cluster.coordinator, "live")
    html = text(viewer_client.get(reverse("console:groups"), {"q": "LIV"}))
    assert 'data-group="live"' in html and 'data-group="billing"' not in html
    html = text(viewer_client.get(reverse("console:groups"), {"state": "Empty"}))
    assert 'data-group="billing"' in html and 'data-group="live"' not in html
    partial = text(viewer_client.get(reverse("console:groups"), {"q": "bill"}, **HX))
    assert partial.lstrip().startswith('<div id="group-table"') and "<html" not in partial
    assert 'hx-trigger="every 5s' in partial and "q=bill" in partial  # keeps its filter


def test_list_without_groups_says_so(viewer_client, broker):
    assert "No consumer groups yet" in text(viewer_client.get(reverse("console:groups")))


def test_group_ids_are_escaped_and_may_contain_slashes(viewer_client, cluster):
    cluster.coordinator.commit_offsets("team/<b>x</b>", {("orders", 0): 1})
    html = text(viewer_client.get(reverse("console:groups")))
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    url = reverse("console:group", args=["team/<b>x</b>"])
    response = viewer_client.get(url)
    assert response.status_code == 200 and "&lt;b&gt;x&lt;/b&gt;" in text(response)


# ------------------------------------------------------------------------------ detail


def test_detail_shows_members_assignment_idle_members_and_per_partition_lag(viewer_client, cluster):
    busy, idle = two_members_one_idle(cluster.coordinator, "live")
    response = viewer_client.get(reverse("console:group", args=["live"]))
    assert response.status_code == 200
    html = text(response)
    assert 'id="group-state">Stable<' in html
    busy_row = re.search(rf'<tr data-member="{re.escape(busy)}".*?</tr>', html, re.S).group(0)
    assert "app-1" in busy_row and "/10.0.0.5" in busy_row and "0, 1, 2" in busy_row
    assert "idle" not in busy_row
    idle_row = re.search(rf'<tr data-member="{re.escape(idle)}"[^>]*>.*?</tr>', html, re.S).group(0)
    assert 'data-idle="1"' in idle_row and ">idle<" in idle_row
    assert "(1 idle)" in html
    orders = re.search(r'<section class="grp-card" data-topic="orders".*?</section>', html, re.S)
    assert orders and orders.group(0).count(">app-1</span>") == 3  # owner of each partition
    assert "Generation" in html and "range" in html  # protocol and generation
    assert 'hx-trigger="every 5s' in html  # refreshes itself


def test_detail_committed_end_lag_commit_time_and_topic_totals(viewer_client, cluster):
    html = text(viewer_client.get(reverse("console:group", args=["billing"])))
    orders = re.search(r'data-topic="orders".*?</section>', html, re.S).group(0)
    rows = dict(re.findall(r'<tr data-partition="(\d+)" data-lag="(\d*)"', orders))
    assert rows == {"0": "5", "1": "0"}  # orders-2 was never committed nor assigned
    assert re.search(r'class="grp-topic-lag"[^>]*>5<', orders)  # total per topic
    assert "ago</time>" in orders  # commit time
    assert "No active members" in html and "an operator can reset its offsets" in html
    assert "Empty" in html


def test_an_empty_group_tells_each_role_what_it_can_do(client, viewer, operator, cluster):
    url = reverse("console:group", args=["billing"])  # Empty, no members
    client.force_login(viewer)
    viewer = re.search(r'<p class="muted" id="no-members">(.*?)</p>', text(client.get(url)))
    assert "can be reset" not in viewer.group(1)
    assert "an operator can reset its offsets or delete it" in viewer.group(1)
    assert "audit log" in viewer.group(1)
    client.force_login(operator)
    operator = re.search(r'id="no-members">(.*?)</p>', text(client.get(url)))
    assert "its offsets can be reset and the group deleted" in operator.group(1)


def test_detail_flags_partitions_that_fell_behind_retention(viewer_client, cluster):
    cluster.store.delete_records("payments", {0: 4})  # billing is at 2: records 2, 3 gone
    html = text(viewer_client.get(reverse("console:group", args=["billing"])))
    payments = re.search(r'data-topic="payments".*?</section>', html, re.S).group(0)
    assert 'data-behind="1"' in payments and "behind retention" in payments
    assert 'id="behind-retention"' in html and "auto.offset.reset" in html
    assert re.search(r'data-partition="0" data-lag="1"', payments)  # 5 - 4: what still exists


def test_only_partitions_with_lag(viewer_client, cluster):
    url = reverse("console:group", args=["billing"])
    html = text(viewer_client.get(url, {"lag": "1"}, **HX))
    assert html.lstrip().startswith('<section id="group-live"') and "<html" not in html
    assert re.search(r'data-topic="orders".*?data-partition="0"', html, re.S)
    orders = re.search(r'data-topic="orders".*?</section>', html, re.S).group(0)
    assert 'data-partition="1"' not in orders and "1 partition without lag hidden" in orders
    assert 'hx-get="/groups/billing/?lag=1"' in html  # polling keeps the filter
    assert 'id="lag-only" checked' in html


def test_unknown_group_is_a_404_page(viewer_client, broker):
    response = viewer_client.get(reverse("console:group", args=["nope"]))
    assert response.status_code == 404 and "No consumer group “nope”" in text(response)
    response = viewer_client.get(reverse("console:groups") + "nope/")
    assert response.status_code == 404


def test_viewer_sees_no_operator_actions(viewer_client, cluster):
    html = text(viewer_client.get(reverse("console:group", args=["billing"])))
    assert 'id="delete-group"' not in html and "needs the operator role" in html
    assert reverse("console:group_reset", args=["billing"]) not in html


def test_operator_sees_delete_disabled_while_members_are_active(operator_client, cluster):
    member = active_member(cluster.coordinator, "live")
    html = text(operator_client.get(reverse("console:group", args=["live"])))
    button = re.search(r'<button[^>]*id="delete-group"[^>]*>', html, re.S).group(0)
    assert "disabled" in button
    assert 'id="busy-reason"' in html and member in html and "Stable" in html
    html = text(operator_client.get(reverse("console:group", args=["billing"])))
    button = re.search(r'<button[^>]*id="delete-group"[^>]*>', html, re.S).group(0)
    assert "disabled" not in button


# ------------------------------------------------------------------------------ delete


def test_delete_empty_group(operator_client, cluster):
    response = operator_client.post(reverse("console:group_delete", args=["billing"]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("console:groups")
    assert "Deleted consumer group billing" in text(response)
    assert "billing" not in [g for g, _ in cluster.coordinator.list_groups()]
    entry = AuditEntry.objects.get(action="group.delete")
    assert entry.target == "group billing" and entry.username == "olivia"
    assert entry.before == {"offsets": {"orders": {"0": 5, "1": 20}, "payments": {"0": 2}}}


def test_delete_refused_while_members_are_active(operator_client, cluster):
    member = active_member(cluster.coordinator, "live")
    response = operator_client.post(reverse("console:group_delete", args=["live"]), follow=True)
    assert response.status_code == 200
    html = text(response)
    assert "Not deleted" in html and member in html and "not Empty" in html
    assert "live" in [g for g, _ in cluster.coordinator.list_groups()]
    assert AuditEntry.objects.filter(action="group.delete.refused").count() == 1


def test_delete_via_htmx_redirects_the_page(operator_client, cluster):
    response = operator_client.post(reverse("console:group_delete", args=["billing"]), **HX)
    assert response.status_code == 200 and response["HX-Redirect"] == reverse("console:groups")


def test_delete_offsets_of_one_topic(operator_client, cluster):
    url = reverse("console:group_delete_offsets", args=["billing"])
    response = operator_client.post(url, {"topic": "payments"}, follow=True)
    message = "Deleted the committed offsets of group billing on payments (1 partition)"
    assert message in text(response)
    assert committed(cluster) == {("orders", 0): 5, ("orders", 1): 20}
    entry = AuditEntry.objects.get(action="group.offsets.delete")
    assert entry.before == {"topic": "payments", "offsets": {"payments": {"0": 2}}}


def test_delete_offsets_refused_while_members_read_the_topic(operator_client, cluster):
    active_member(cluster.coordinator, "live")
    url = reverse("console:group_delete_offsets", args=["live"])
    response = operator_client.post(url, {"topic": "orders"}, follow=True)
    assert response.status_code == 200 and "Not deleted" in text(response)
    assert AuditEntry.objects.filter(action="group.offsets.delete.refused").count() == 1


def test_delete_offsets_of_an_unknown_topic_is_a_message(operator_client, cluster):
    url = reverse("console:group_delete_offsets", args=["billing"])
    response = operator_client.post(url, {"topic": "nope"}, follow=True)
    assert response.status_code == 200 and "does not exist" in text(response)


# ------------------------------------------------------------------------------ reset: form


def test_reset_page_offers_scopes_strategies_and_partitions(operator_client, cluster):
    response = operator_client.get(reverse("console:group_reset", args=["billing"]))
    assert response.status_code == 200
    html = text(response)
    for kind in (
        "to-earliest",
        "to-latest",
        "to-current",
        "to-offset",
        "shift-by",
        "to-datetime",
        "by-duration",
        "from-file",
    ):
        assert f'name="strategy" value="{kind}"' in html
    for scope in ("all", "topic", "partitions"):
        assert f'name="scope" value="{scope}"' in html
    for value in ("orders:0", "orders:1", "orders:2", "payments:0"):
        assert f'name="partitions" value="{value}"' in html
    assert 'type="datetime-local"' in html and 'data-duration="PT1H"' in html
    assert 'type="file" name="file"' in html and 'hx-encoding="multipart/form-data"' in html


def test_reset_page_is_prescoped_from_a_topic_or_partition_link(operator_client, cluster):
    url = reverse("console:group_reset", args=["billing"])
    html = text(operator_client.get(url, {"topic": "orders", "partition": "1"}))
    assert 'name="scope" value="partitions" checked' in html
    assert 'value="orders:1" checked' in html
    html = text(operator_client.get(url, {"topic": "payments"}))
    assert 'name="scope" value="topic" checked' in html
    assert '<option value="payments" selected>' in html


def test_reset_page_of_an_unknown_group_is_a_404(operator_client, broker):
    response = operator_client.get(reverse("console:group_reset", args=["nope"]))
    assert response.status_code == 404


# ------------------------------------------------------------------------------ reset: preview


def _at(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"strategy": "to-earliest"}, {("orders", 0): 0, ("orders", 1): 0, ("payments", 0): 0}),
        ({"strategy": "to-latest"}, {("orders", 0): 10, ("orders", 1): 20, ("payments", 0): 5}),
        ({"strategy": "to-current"}, {("orders", 0): 5, ("orders", 1): 20, ("payments", 0): 2}),
        (  # clamped to the log end on orders-0 and payments-0
            {"strategy": "to-offset", "offset": "15"},
            {("orders", 0): 10, ("orders", 1): 15, ("payments", 0): 5},
        ),
        (  # payments-0: 2 - 3 clamped to the log start
            {"strategy": "shift-by", "shift": "-3"},
            {("orders", 0): 2, ("orders", 1): 17, ("payments", 0): 0},
        ),
        (  # payments has no record 7 minutes after the start: its end
            {"strategy": "to-datetime", "datetime": "+7"},
            {("orders", 0): 7, ("orders", 1): 7, ("payments", 0): 5},
        ),
        (  # now - 50.5 min: record 10 of every partition (orders-0 and payments end before)
            {"strategy": "by-duration", "duration": "PT50M30S"},
            {("orders", 0): 10, ("orders", 1): 10, ("payments", 0): 5},
        ),
        (  # the file names its partitions; the scope is not used
            {"strategy": "from-file", "csv_text": "orders,0,3\norders,2,25\n"},
            {("orders", 0): 3, ("orders", 2): 25},
        ),
    ],
    ids=lambda v: v.get("strategy", "") if isinstance(v, dict) and "strategy" in v else "",
)
def test_preview_of_every_strategy(operator_client, cluster, base_ms, fields, expected):
    if fields.get("datetime") == "+7":
        fields = {**fields, "datetime": _at(base_ms + 7 * MINUTE)}
    response = preview(operator_client, **fields)
    assert response.status_code == 200
    html = text(response)
    assert html.lstrip().startswith('<section class="grp-preview"'), html[:500]
    assert plan_rows(html) == expected
    assert committed(cluster) == BILLING  # a preview changes nothing


def test_preview_shows_clamps_replay_skip_and_totals(operator_client, cluster):
    html = text(preview(operator_client, strategy="to-offset", offset="15"))
    assert "clamped" in html and "15 is past the log end offset 10" in html
    # orders-0: 5 -> 10 skips 5; orders-1: 20 -> 15 replays 5; payments-0: 2 -> 5 skips 3
    assert 'id="total-replay">5<' in html and 'id="total-skip">8<' in html
    assert 'id="plan-changes">3<' in html


def test_preview_from_an_uploaded_file_and_from_an_exported_plan(operator_client, cluster):
    upload = SimpleUploadedFile(
        "offsets.csv", b"topic,partition,offset\npayments,0,4\n", "text/csv"
    )
    html = text(preview(operator_client, strategy="from-file", files={"file": upload}))
    assert plan_rows(html) == {("payments", 0): 4}
    # the console's own CSV (current_offset, new_offset columns) reads the *new* offsets
    exported = text(preview(operator_client, strategy="to-earliest"))
    csv_text = operator_client.post(
        reverse("console:group_reset_csv", args=["billing"]), {"plan": token_of(exported)}
    ).content
    html = text(
        preview(
            operator_client,
            strategy="from-file",
            files={"file": SimpleUploadedFile("plan.csv", csv_text, "text/csv")},
        )
    )
    assert plan_rows(html) == {("orders", 0): 0, ("orders", 1): 0, ("payments", 0): 0}


def test_preview_from_kafkas_multi_group_file_keeps_this_groups_lines(operator_client, cluster):
    lines = "group,topic,partition,offset\nbilling,orders,1,4\nother,orders,0,9\n"
    html = text(preview(operator_client, strategy="from-file", csv_text=lines))
    assert plan_rows(html) == {("orders", 1): 4}
    html = text(preview(operator_client, strategy="from-file", csv_text="other,orders,0,9\n"))
    assert "none for &#x27;billing&#x27;" in html


def test_one_message_per_mistake(operator_client, cluster):
    html = text(preview(operator_client, strategy="to-offset", offset=str(10**30)))
    assert html.count("<li>") == 1 and "less than or equal to 9223372036854775807" in html


def test_preview_scope_one_topic_includes_partitions_without_commits(operator_client, cluster):
    html = text(preview(operator_client, scope="topic", topic="orders", strategy="to-earliest"))
    assert plan_rows(html) == {("orders", 0): 0, ("orders", 1): 0, ("orders", 2): 0}
    assert "no committed offset yet" in html


def test_preview_scope_chosen_partitions_across_topics(operator_client, cluster):
    html = text(
        preview(
            operator_client,
            scope="partitions",
            partitions=["orders:1", "payments:0"],
            strategy="to-latest",
        )
    )
    assert plan_rows(html) == {("orders", 1): 20, ("payments", 0): 5}


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"strategy": "to-offset"}, "give the offset"),
        ({"strategy": "to-offset", "offset": "-1"}, "greater than or equal to 0"),
        ({"strategy": "to-offset", "offset": "ten"}, "Enter a whole number"),
        ({"strategy": "shift-by"}, "how many records to shift"),
        ({"strategy": "to-datetime", "datetime": "yesterday"}, "is not a date-time"),
        (  # a moment before year 1 in UTC: was a 500 (ValueError)
            {"strategy": "to-datetime", "datetime": "0001-01-01T00:00:00+05:00"},
            "is out of range: give a moment between 0001-01-01 and 9999-12-31 (UTC)",
        ),
        ({"strategy": "to-datetime", "datetime": str(2**80)}, "is out of range"),
        ({"strategy": "by-duration", "duration": "P" + "9" * 30 + "D"}, "is out of range"),
        ({"strategy": "by-duration", "duration": "1 hour"}, "is not an ISO-8601 duration"),
        ({"strategy": "from-file"}, "upload a CSV file"),
        ({"strategy": "from-file", "csv_text": "orders,x,1"}, "must be numbers"),
        (
            {"strategy": "from-file", "csv_text": "nope,0,1"},
            "topic &#x27;nope&#x27; does not exist",
        ),
        ({"strategy": "from-file", "csv_text": "orders,7,1"}, "has no partition 7"),
        ({"strategy": "sideways"}, "Select a valid choice"),
        ({"strategy": "to-earliest", "scope": "topic"}, "choose the topic"),
        ({"strategy": "to-earliest", "scope": "partitions"}, "tick at least one partition"),
        (
            {"strategy": "to-earliest", "scope": "partitions", "partitions": "nope:0"},
            "valid choice",
        ),
        (  # orders-2 has no committed offset to shift from
            {"strategy": "shift-by", "shift": "1", "scope": "topic", "topic": "orders"},
            "has no committed offset to shift from",
        ),
    ],
)
def test_bad_input_is_a_message_never_a_server_error(operator_client, cluster, fields, message):
    response = preview(operator_client, **fields)
    assert response.status_code == 200
    html = text(response)
    assert 'id="reset-errors"' in html and message in html, html
    response = preview(operator_client, htmx=False, **fields)
    assert response.status_code == 400 and message in text(response)


# ------------------------------------------------------------------------------ reset: CSV


def test_csv_of_the_previewed_plan(operator_client, cluster):
    html = text(preview(operator_client, strategy="to-offset", offset="15"))
    response = operator_client.post(
        reverse("console:group_reset_csv", args=["billing"]), {"plan": token_of(html)}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert re.match(
        r'attachment; filename="billing-reset-to-offset-\d{8}T\d{6}Z\.csv"',
        response["Content-Disposition"],
    )
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("topic,partition,new_offset,current_offset")
    assert lines[1:] == [
        "orders,0,10,5,0,10,0,5,15 is past the log end offset 10",
        "orders,1,15,20,0,20,5,0,",
        "payments,0,5,2,0,5,0,3,15 is past the log end offset 5",
    ]


def test_csv_by_get_plans_now_and_rejects_bad_input(operator_client, cluster):
    url = reverse("console:group_reset_csv", args=["billing"])
    response = operator_client.get(url, {"scope": "all", "strategy": "to-earliest"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert len(response.content.decode().splitlines()) == 4
    response = operator_client.get(url, {"scope": "all", "strategy": "to-offset"})
    assert response.status_code == 400 and b"give the offset" in response.content
    response = operator_client.post(url, {"plan": "forged"})
    assert response.status_code == 400 and b"not one this console previewed" in response.content


# ------------------------------------------------------------------------------ reset: apply


def test_apply_when_empty_commits_exactly_the_preview_and_audits(operator_client, cluster):
    html = text(preview(operator_client, strategy="shift-by", shift="-3"))
    button = re.search(r'<button[^>]*id="apply-button"[^>]*>', html, re.S).group(0)
    assert "disabled" not in button and "Apply 3 changes" in html
    response = apply(operator_client, token_of(html))
    assert response.status_code == 200
    body = text(response)
    assert 'id="reset-applied"' in body and "Offsets reset" in body
    assert committed(cluster) == {("orders", 0): 2, ("orders", 1): 17, ("payments", 0): 0}
    entry = AuditEntry.objects.get(action="group.reset")
    assert entry.target == "group billing" and entry.username == "olivia"
    assert entry.before == {"offsets": {"orders": {"0": 5, "1": 20}, "payments": {"0": 2}}}
    assert entry.after == {
        "strategy": "shift-by -3",
        "offsets": {"orders": {"0": 2, "1": 17}, "payments": {"0": 0}},
    }


def test_apply_uses_the_previewed_targets_not_a_new_plan(operator_client, cluster):
    """to-latest previewed at 10: records produced afterwards are not skipped by the apply."""
    html = text(preview(operator_client, scope="topic", topic="payments", strategy="to-latest"))
    cluster.store.append("payments", b"late", partition=0)
    assert 'id="reset-applied"' in text(apply(operator_client, token_of(html)))
    assert committed(cluster)[("payments", 0)] == 5  # not 6


def test_apply_without_htmx_renders_a_result_page(operator_client, cluster):
    html = text(preview(operator_client, strategy="to-earliest"))
    response = apply(operator_client, token_of(html), htmx=False)
    assert response.status_code == 200
    assert "<html" in text(response) and 'id="reset-applied"' in text(response)


def test_apply_is_disabled_and_refused_while_a_member_is_active(operator_client, cluster):
    cluster.coordinator.commit_offsets("live", {("orders", 0): 1})
    member = active_member(cluster.coordinator, "live", client_id="fulfilment-1")
    page = text(operator_client.get(reverse("console:group_reset", args=["live"])))
    assert 'id="busy-reason"' in page and member in page
    html = text(preview(operator_client, group="live", strategy="to-earliest"))
    button = re.search(r'<button[^>]*id="apply-button"[^>]*>', html, re.S).group(0)
    assert "disabled" in button
    reason = re.search(r'id="gate-reason">(.*?)</p>', html, re.S).group(1)
    assert "Stable" in reason and "fulfilment-1" in reason and member in reason
    # the button is only a hint: a POST anyway is refused by the coordinator, clearly
    response = apply(operator_client, token_of(html), group="live")
    assert response.status_code == 200
    body = text(response)
    assert 'id="reset-refused"' in body and member in body and "Nothing was changed" in body
    response = apply(operator_client, token_of(html), group="live", htmx=False)
    assert response.status_code == 409 and 'id="reset-refused"' in text(response)
    assert committed(cluster, "live") == {("orders", 0): 1}
    refused = AuditEntry.objects.filter(action="group.reset.refused")
    assert refused.count() == 2 and member in refused.first().after["reason"]
    assert not AuditEntry.objects.filter(action="group.reset").exists()


def test_a_stream_jobs_group_says_to_stop_the_job_to_reset_it(operator_client, cluster):
    """A group whose member is a worker of the stream job it is named after (client id
    ``tidelog-job-<job>``, an embedded job's or a ``python -m streams.jobs run`` worker's):
    the reason the reset waits says to stop the job, reset, and start it again (a replay).
    Another group's member with such a client id is not taken for the job's."""
    cluster.coordinator.commit_offsets("shop", {("orders", 0): 1})
    active_member(cluster.coordinator, "shop", client_id="tidelog-job-shop@127.0.0.1:8123")
    page = text(operator_client.get(reverse("console:group_reset", args=["shop"])))
    reason = re.search(r'id="busy-reason">(.*?)</p>', page, re.S).group(1)
    assert "Empty: its members are workers of the stream job shop: stop the job" in reason
    assert "replay" in reason and "wait for their sessions" not in reason
    active_member(cluster.coordinator, "other", client_id="tidelog-job-shop")
    page = text(operator_client.get(reverse("console:group_reset", args=["other"])))
    reason = re.search(r'id="busy-reason">(.*?)</p>', page, re.S).group(1)
    assert "not Empty" in reason and "stream job" not in reason


def test_members_committing_after_the_preview_is_still_reported_as_not_empty(
    operator_client, cluster
):
    cluster.coordinator.commit_offsets("live", {("orders", 0): 1})
    member = active_member(cluster.coordinator, "live", client_id="fulfilment-1")
    html = text(preview(operator_client, group="live", strategy="to-earliest"))
    generation = cluster.coordinator.describe_group("live").generation
    cluster.coordinator.commit_offsets(
        "live", {("orders", 0): 4}, member_id=member, generation=generation
    )
    body = text(apply(operator_client, token_of(html), group="live"))
    assert 'id="reset-refused"' in body and member in body  # the obstacle first
    assert "orders-0: the committed offset changed from 1 to 4" in body  # and the staleness
    assert committed(cluster, "live") == {("orders", 0): 4}
    entry = AuditEntry.objects.get(action="group.reset.refused")
    assert "not Empty" in entry.after["reason"] and "out of date" in entry.after["reason"]


def test_member_joining_between_preview_and_apply_is_a_clear_refusal(operator_client, cluster):
    html = text(preview(operator_client, strategy="to-earliest"))
    button = re.search(r'<button[^>]*id="apply-button"[^>]*>', html, re.S).group(0)
    assert "disabled" not in button  # Empty at preview time
    member = join(cluster.coordinator, "billing", "late-joiner").result(5).member_id
    response = apply(operator_client, token_of(html))
    assert response.status_code == 200
    body = text(response)
    assert 'id="reset-refused"' in body and "not Empty" in body and member in body
    assert committed(cluster) == BILLING
    entry = AuditEntry.objects.get(action="group.reset.refused")
    assert entry.before == {"offsets": {"orders": {"0": 5, "1": 20}, "payments": {"0": 2}}}
    assert entry.after["offsets"] == {"orders": {"0": 0, "1": 0}, "payments": {"0": 0}}


def header_state(html: str) -> tuple[str, bool]:
    """The state in the reset page's header (#reset-group-state), and whether it is sent out of
    band (htmx replaces the header's with it)."""
    m = re.search(r'<span [^>]*id="reset-group-state"([^>]*)>([^<]*)</span>', html)
    assert m, "no group state for the header"
    return m.group(2), 'hx-swap-oob="true"' in m.group(1)


def test_a_refused_apply_shows_the_state_that_refused_it(operator_client, cluster):
    """Empty at preview time; a member joins; the refusal and the page header both name the
    state the coordinator refused in (not the Empty of the preview)."""
    page = text(operator_client.get(reverse("console:group_reset", args=["billing"])))
    assert header_state(page) == ("Empty", False) and "out-of-band" not in page  # no comment
    token = token_of(text(preview(operator_client, strategy="to-earliest")))
    active_member(cluster.coordinator, "billing", client_id="late-joiner")
    body = text(apply(operator_client, token))
    assert 'id="reset-refused"' in body
    assert header_state(body) == ("Stable", True)  # replaces the header's "Empty"
    assert "is Stable, not Empty" in body
    page = text(apply(operator_client, token, htmx=False))  # the result page, without htmx
    assert header_state(page) == ("Stable", False) and "is Stable, not Empty" in page
    # the gate's poll keeps the header in step with the state it reports
    gate = text(
        operator_client.get(reverse("console:group_reset", args=["billing"]), {"gate": "1"}, **HX)
    )
    assert header_state(gate) == ("Stable", True) and "The group is Stable" in gate


def test_apply_refuses_a_preview_that_went_stale(operator_client, cluster):
    html = text(preview(operator_client, strategy="to-earliest"))
    cluster.coordinator.commit_offsets("billing", {("orders", 0): 7})  # someone else's reset
    body = text(apply(operator_client, token_of(html)))
    assert 'id="reset-stale"' in body
    assert "orders-0: the committed offset changed from 5 to 7" in body
    assert committed(cluster)[("orders", 1)] == 20  # nothing applied
    assert AuditEntry.objects.filter(action="group.reset.refused").count() == 1


def test_apply_refuses_a_forged_or_foreign_plan(operator_client, cluster):
    html = text(preview(operator_client, strategy="to-earliest"))
    token = token_of(html)
    body = text(apply(operator_client, token[:-3] + "abc"))
    assert 'id="reset-error"' in body and "not one this console previewed" in body
    cluster.coordinator.commit_offsets("other", {("orders", 0): 1})
    body = text(apply(operator_client, token, group="other"))
    assert "another consumer group" in body
    assert committed(cluster) == BILLING and committed(cluster, "other") == {("orders", 0): 1}


# ------------------------------------------------------------------------------ one description


@pytest.fixture
def describes(monkeypatch):
    """Counts the describe_group calls of the real LocalCluster (each is a DescribeGroups and
    an OffsetFetch round trip on an external cluster); `describes.take()` returns the count
    since the last take."""
    from streams.cluster import LocalCluster

    real = LocalCluster.describe_group

    class Counter:
        n = 0

        def take(self) -> int:
            n, self.n = self.n, 0
            return n

    counter = Counter()

    def counting(self, group_id):
        counter.n += 1
        return real(self, group_id)

    monkeypatch.setattr(LocalCluster, "describe_group", counting)
    return counter


def test_each_group_request_describes_the_group_once(operator_client, cluster, describes):
    """Pages, previews, every outcome of an apply, the CSV, deletes and the JSON API."""
    c, group = operator_client, reverse("console:group", args=["billing"])
    reset = reverse("console:group_reset", args=["billing"])
    csv = reverse("console:group_reset_csv", args=["billing"])
    seen = {}

    def count(name, response, status=200):
        assert response.status_code == status, (name, response.status_code)
        seen[name] = describes.take()
        return response

    count("detail", c.get(group))
    count("detail (live)", c.get(group, {"lag": "1"}, **HX))
    count("reset page", c.get(reset))
    count("gate", c.get(reset, {"gate": "1", "changes": "3"}, **HX))
    html = text(count("preview", preview(c, strategy="to-earliest")))
    count("csv of the preview", c.post(csv, {"plan": token_of(html)}))
    count("csv planned now", c.get(csv, {"scope": "all", "strategy": "to-latest"}))
    body = text(count("apply", apply(c, token_of(html))))
    assert 'id="reset-applied"' in body
    cluster.coordinator.commit_offsets("billing", {("orders", 0): 7})  # the preview goes stale
    body = text(count("apply (stale)", apply(c, token_of(html))))
    assert 'id="reset-stale"' in body
    # stale because a member joined and committed: the apply names it and the staleness
    html = text(preview(c, strategy="to-latest"))
    member = active_member(cluster.coordinator, "billing")
    generation = cluster.coordinator.describe_group("billing").generation
    cluster.coordinator.commit_offsets(
        "billing", {("orders", 0): 8}, member_id=member, generation=generation
    )
    describes.take()
    body = text(count("apply (refused, stale)", apply(c, token_of(html))))
    assert 'id="reset-refused"' in body and member in body and "changed from 7 to 8" in body
    cluster.coordinator.leave_group("billing", member)

    api = "/api/v1/groups/billing"
    count("api describe", c.get(api))
    reset_body = {"strategy": "to-earliest", "scope": "all_topics", "dry_run": False}
    count("api reset", c.post(f"{api}/reset", reset_body, content_type="application/json"))
    count("api delete offsets", c.delete(f"{api}/offsets/payments"))
    delete_offsets = reverse("console:group_delete_offsets", args=["billing"])
    count("delete offsets", c.post(delete_offsets, {"topic": "orders"}), 302)
    cluster.coordinator.commit_offsets("other", {("orders", 0): 1})
    count("delete", c.post(reverse("console:group_delete", args=["other"])), 302)
    count("api delete", c.delete(api), 204)
    # the CSV of a previewed plan carries the plan itself: no description at all
    assert seen == {**dict.fromkeys(seen, 1), "csv of the preview": 0}, seen


def test_gate_polls_the_group_state(operator_client, cluster):
    url = reverse("console:group_reset", args=["billing"])
    html = text(operator_client.get(url, {"gate": "1", "changes": "2"}, **HX))
    assert 'data-enabled="1"' in html and "Apply 2 changes" in html
    html = text(operator_client.get(url, {"gate": "1", "changes": "0"}, **HX))
    assert 'data-enabled="0"' in html and "Nothing to apply" in html
    member = join(cluster.coordinator, "billing", "late-joiner").result(5).member_id
    html = text(operator_client.get(url, {"gate": "1", "changes": "2"}, **HX))
    assert 'data-enabled="0"' in html and member in html


# ------------------------------------------------------------------------------ roles


def _mutations(cluster):
    token_free = {"action": "apply", "plan": "x"}
    return [
        ("post", reverse("console:group_delete", args=["billing"]), {}),
        ("post", reverse("console:group_delete_offsets", args=["billing"]), {"topic": "orders"}),
        ("get", reverse("console:group_reset", args=["billing"]), {}),
        (
            "post",
            reverse("console:group_reset", args=["billing"]),
            {"action": "preview", "scope": "all", "strategy": "to-earliest"},
        ),
        ("post", reverse("console:group_reset", args=["billing"]), token_free),
        (
            "get",
            reverse("console:group_reset_csv", args=["billing"]),
            {"scope": "all", "strategy": "to-earliest"},
        ),
        ("post", reverse("console:group_reset_csv", args=["billing"]), {"plan": "x"}),
    ]


def test_viewers_get_403_on_every_mutation(viewer_client, cluster):
    for method, url, data in _mutations(cluster):
        response = getattr(viewer_client, method)(url, data)
        assert response.status_code == 403, (method, url)
    assert committed(cluster) == BILLING
    assert not AuditEntry.objects.exists()


def test_anonymous_users_are_sent_to_log_in(client, cluster):
    urls = [
        ("get", reverse("console:groups"), {}),
        ("get", reverse("console:group", args=["billing"]), {}),
    ]
    for method, url, data in urls + _mutations(cluster):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
    assert committed(cluster) == BILLING


def test_get_is_not_allowed_on_delete(operator_client, cluster):
    response = operator_client.get(reverse("console:group_delete", args=["billing"]))
    assert response.status_code == 405
