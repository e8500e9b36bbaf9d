"""Consumer health through the console: statuses by Burrow's rules on the overview, the group
list and a group's page, with their explanation, lag in time, time to catch up and lag as a
share of retention — no "lagging" for a consumer keeping pace, none for a finished Empty group."""

from __future__ import annotations

import html as htmllib
import re
import time

import pytest
from django.urls import reverse

HX = {"HTTP_HX_REQUEST": "true"}


def _commit(broker, group, offsets):
    broker.coordinator.commit_offsets(group, offsets)
    time.sleep(0.005)  # commits a few ms apart: each is a new commit in the window
    broker.health.sample()


@pytest.fixture
def groups(broker):
    """keeping-pace: commits move with the producers, lag 0–2; finished: Empty, read all;
    stuck: commits the same offset with lag; catching-up: reading a backlog."""
    store = broker.store
    store.create_topic("orders", 1, {"retention.ms": str(3600_000)})
    store.create_topic("backlog", 1)
    store.append_batch("backlog", [(b"b",)] * 1000, partition=0)
    offset = 0
    for step in range(4):
        store.append_batch("orders", [(b"o",)] * 10, partition=0)
        offset += 10
        _commit(broker, "keeping-pace", {("orders", 0): offset - (2, 0, 1, 2)[step]})
        _commit(broker, "finished", {("orders", 0): offset})
        _commit(broker, "stuck", {("orders", 0): 3})
        _commit(broker, "catching-up", {("backlog", 0): 100 * (step + 1)})
    store.append_batch("orders", [(b"late",)], partition=0)
    _commit(broker, "finished", {("orders", 0): offset + 1})
    _commit(broker, "keeping-pace", {("orders", 0): offset - 1})
    return broker


def _text(response) -> str:
    return re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", response.text)))


def _status_cell(html: str, group: str) -> str:
    row = re.search(rf'<tr data-group="{group}".*?</tr>', html, re.S).group(0)
    return re.search(r'<td data-status="([A-Z]*)"', row).group(1)


def test_overview_counts_groups_by_status(viewer_client, groups):
    response = viewer_client.get(reverse("console:home"))
    html = response.content.decode()
    assert "lagging" not in html
    counts = dict(re.findall(r'data-status-count="(\w+)">(\d+) ', html))
    assert counts == {"OK": "3", "STALL": "1"}, counts
    assert _status_cell(html, "keeping-pace") == "OK"
    assert _status_cell(html, "finished") == "OK"
    assert _status_cell(html, "stuck") == "STALL"
    # worst first
    assert html.index('data-group="stuck"') < html.index('data-group="finished"')


def test_group_list_shows_status_and_why(viewer_client, groups):
    response = viewer_client.get(reverse("console:groups"))
    html = response.content.decode()
    assert _status_cell(html, "stuck") == "STALL"
    assert _status_cell(html, "catching-up") == "OK"
    assert "commits at offset 3" in _text(response)


def test_a_stuck_group_is_stalled_with_its_lag_in_time(viewer_client, groups):
    response = viewer_client.get(reverse("console:group", args=["stuck"]), **HX)
    text = _text(response)
    assert 'data-status="STALL"' in response.content.decode()
    assert "orders-0: 4 commits at offset 3" in text
    age = re.search(r'id="lag-age">([^<]+)<', response.content.decode()).group(1)
    assert re.fullmatch(r"\d+(\.\d)? s", age), age  # the record at offset 3 is a moment old
    assert "— orders-0: not gaining: consuming 0.0 records/s" in text
    share = re.search(r'id="retention-share">([^<]+)<', response.content.decode()).group(1)
    assert share.endswith("%"), share  # of retention.ms = 1 h
    assert "What the statuses mean" in text and "STOP" in text


def test_a_healthy_consumer_with_a_small_lag_is_ok(viewer_client, groups):
    response = viewer_client.get(reverse("console:group", args=["keeping-pace"]))
    html = response.content.decode()
    assert 'id="health-reason"' in html
    assert re.search(r'lag-status-ok" data-status="OK"', html)
    assert "not catching up" not in html


def test_a_finished_empty_group_is_ok_and_caught_up(viewer_client, groups):
    response = viewer_client.get(reverse("console:group", args=["finished"]))
    text = _text(response)
    assert "Status OK" in text
    assert re.search(r"Time to catch up caught up", text)
    assert re.search(r"Lag in time none", text)


def test_a_group_reading_a_backlog_has_a_time_to_catch_up(viewer_client, groups):
    response = viewer_client.get(reverse("console:group", args=["catching-up"]))
    catch_up = re.search(r'id="catch-up">([^<]+)<', response.content.decode()).group(1)
    assert catch_up.startswith("about "), catch_up
