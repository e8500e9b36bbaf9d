"""A user panel in Debian's Chromium against a real server: the form refuses a field path the
topic's records do not have (saying why, keeping what was typed), the panel gets its own URL,
and its figure draws final and not-final windows as different traces, the watermark as a line,
late events as markers, and corrections as "old → new"; after a reload the corrections list
holds as many entries as the counter says. Screenshots: tests/browser/screenshots/panels-*.png."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.test_live_browser import WAIT_MS, _api_post, _login, _wait_live

pytestmark = pytest.mark.browser

FIGURE = """() => {
    const fig = document.querySelector('[data-chart=panel]');
    const traces = fig.data.map(t => ({
        name: t.name, state: t.meta.state, windows: t.meta.windows, events: t.meta.events,
        dash: t.line ? t.line.dash : null, symbol: t.marker.symbol,
        values: t.y.filter((y, i) => t.marker.size[i] > 0 || t.meta.state === 'late'),
        x: t.x.filter((x, i) => t.marker.size[i] > 0 || t.meta.state === 'late')
              .map(x => new Date(x).getTime()),
    }));
    const shape = (fig.layout.shapes || []).find(s => s.name === 'watermark');
    return {
        traces,
        watermark: shape ? [new Date(shape.x0).getTime(), new Date(shape.x1).getTime()] : null,
        stat: Number(fig.dataset.watermark),
        range: fig.layout.xaxis.range.map(x => new Date(x).getTime()),
    };
}"""


def _stat(page, name: str, value: str) -> None:
    page.wait_for_function(
        "([name, value]) => document.querySelector(`[data-stat=${name}]`).textContent === value",
        arg=[name, value],
        timeout=WAIT_MS,
    )


def _by_state(figure: dict) -> dict:
    out: dict[str, list] = {}
    for trace in figure["traces"]:
        out.setdefault(trace["state"], []).append(trace)
    return out


def test_a_panel_checks_its_fields_draws_windows_watermark_late_events_and_corrections(
    operator_login, browser
):
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1500})
    _login(page, server, user, password)
    SCREENSHOTS.mkdir(exist_ok=True)
    # a topic of its own: test_live_browser.py writes other records to its "late-orders"
    _api_post(page, server, "/api/v1/topics", {"name": "panel-late-orders", "partitions": 1})
    t0 = int(time.time()) // 10 * 10 * 1000 - 60_000  # windows of 10 s start at t0

    def produce(*records: tuple[int, int]) -> None:
        body = [{"value": json.dumps({"total": total, "ts": t0 + at})} for at, total in records]
        _api_post(page, server, "/api/v1/topics/panel-late-orders/records", body)

    produce((1000, 1), (12_000, 2))  # watermark t0 + 12 s: [t0, +10 s) within its lateness
    _api_post(page, server, "/api/v1/topics/panel-late-orders/records", [{"value": '{"total": 1}'}])

    # a field path the records do not have: refused with the reason, nothing typed is lost
    page.goto(server + "/panels/")
    page.fill("#id_name", "Late orders")
    page.select_option("#id_topic", "panel-late-orders")
    page.select_option("#id_aggregation", "sum")
    page.fill("#id_value_field", "totl")
    page.fill("#id_size_s", "10")
    page.fill("#id_time_field", "ts")
    page.fill("#id_lateness_s", "5")
    page.fill("#id_out_of_orderness_s", "0")
    page.click("#panel-form button[type=submit]")
    page.wait_for_selector("#value_field-msg.field-error")
    message = page.locator("#value_field-msg").inner_text()
    assert "field 'totl' missing in 3 of 3 sampled records; fields there: total, ts" in message
    assert page.locator("#id_accept_partial").count() == 0  # no record fits: no way round
    assert page.input_value("#id_name") == "Late orders"
    assert page.input_value("#id_lateness_s") == "5"
    assert page.url == server + "/panels/"
    page.screenshot(path=str(SCREENSHOTS / "panels-field-check.png"), full_page=True)

    page.fill("#id_value_field", "total")  # now only the record without ts does not fit
    page.click("#panel-form button[type=submit]")
    page.wait_for_selector("#id_accept_partial")  # every field fits some records: offered
    # htmx settles a swap by carrying the old element's classes over for a moment: wait it out
    from playwright.sync_api import expect

    expect(page.locator("#value_field-msg.field-error")).to_have_count(0)
    assert "field 'ts' missing in 1 of 3 sampled records" in page.inner_text("#time_field-msg")
    assert page.input_value("#id_value_field") == "total"
    page.screenshot(path=str(SCREENSHOTS / "panels-field-check-partial.png"), full_page=True)
    page.check("#id_accept_partial")  # saved anyway: that record counts as unreadable
    page.click("#panel-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/panels/\d+/$"))  # the panel's own URL
    panel_url = page.url
    _wait_live(page)
    _stat(page, "records_read", "3")
    _stat(page, "parse_errors", "1")

    produce((2000, 4))  # within the allowed lateness: corrects [t0, +10 s) from 1 to 5
    _stat(page, "corrections", "1")
    produce((20_000, 8), (3000, 16))  # watermark t0 + 20 s: [t0, +10 s) final; then too late
    _stat(page, "late_count", "1")

    def check_figure() -> None:
        figure = page.evaluate(FIGURE)
        states = _by_state(figure)
        (final,) = states["final"]
        (open_,) = states["open"]
        (late,) = states["late"]
        assert final["windows"] == 1 and final["values"] == [5] and final["dash"] == "solid"
        assert final["symbol"] == "circle"
        # [t0 + 10 s, + 20 s) has fired but may still change (lateness); [+20 s, +30 s) is open
        assert open_["windows"] == 2 and open_["values"] == [2, 8] and open_["dash"] == "dot"
        assert open_["symbol"] == "circle-open" and open_["name"] == "all (not final)"
        assert late["events"] == 1 and late["x"] == [t0 + 3000] and late["values"] == [0]
        assert figure["stat"] == t0 + 20_000
        assert figure["watermark"] == [t0 + 20_000, t0 + 20_000]
        # the x axis spans the data (windows t0 .. t0 + 30 s, a window to spare), 10 windows
        assert figure["range"] == [t0 + 40_000 - 100_000, t0 + 40_000]

    def check_lists() -> None:
        items = page.locator("[data-corrections] li")
        assert items.count() == int(page.locator("[data-stat=corrections]").inner_text()) == 1
        assert items.first.inner_text().endswith(": 1 → 5 (revision 1)"), items.first.inner_text()
        late = page.locator("[data-late-events] li")
        assert late.count() == int(page.locator("[data-stat=late_count]").inner_text()) == 1
        assert late.first.inner_text().endswith(" · value 16 · 17 s behind the watermark")

    page.wait_for_function(
        "() => document.querySelector('[data-chart=panel]').data?.length === 3", timeout=WAIT_MS
    )
    check_figure()
    check_lists()
    page.screenshot(path=str(SCREENSHOTS / "panels-live.png"), full_page=True)

    assert page.locator("[data-stat=records_read]").inner_text() == "6"
    page.reload()  # the list comes from the job's snapshot: it agrees with the counter
    assert page.url == panel_url
    _wait_live(page)
    _stat(page, "corrections", "1")
    page.wait_for_function(
        "() => document.querySelector('[data-chart=panel]').data?.length === 3", timeout=WAIT_MS
    )
    check_figure()
    check_lists()
    page.click("[data-theme-toggle]")
    page.wait_for_timeout(300)
    page.locator(".live").screenshot(path=str(SCREENSHOTS / "panels-dark.png"))


def test_a_grouped_panel_over_demo_orders_draws_one_colour_per_key(operator_login, browser):
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1300})
    _login(page, server, user, password)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.goto(server + "/panels/")
    page.fill("#id_name", "Order value by status")
    page.select_option("#id_topic", "orders")
    page.select_option("#id_aggregation", "sum")
    page.fill("#id_value_field", "total")
    page.fill("#id_group_by", "status")
    page.fill("#id_size_s", "2")
    page.fill("#id_time_field", "ts")
    page.fill("#id_lateness_s", "2")
    page.click("#panel-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/panels/\d+/$"))
    _wait_live(page)
    page.wait_for_function(
        """() => {
            const data = document.querySelector('[data-chart=panel]').data || [];
            const finals = data.filter(t => t.meta.state === 'final');
            return new Set(finals.map(t => t.meta.key)).size >= 2;
        }""",
        timeout=WAIT_MS,
    )
    traces = page.evaluate(
        """() => document.querySelector('[data-chart=panel]').data.map(t => (
            {key: t.meta.key, state: t.meta.state, colour: t.line && t.line.color}))"""
    )
    colours: dict[str, set] = {}
    for trace in traces:
        if trace["state"] != "late":
            colours.setdefault(trace["key"], set()).add(trace["colour"])
    assert set(colours) <= {"placed", "paid", "shipped"}
    assert all(len(c) == 1 for c in colours.values())  # final and not final: one colour a key
    assert len({c for cs in colours.values() for c in cs}) == len(colours)
    page.screenshot(path=str(SCREENSHOTS / "panels-grouped.png"), full_page=True)
