"""Live charts and metric panels in Debian's Chromium against a real server with demo traffic:
the overview, a topic and a consumer group page connect their WebSocket, show "live" and draw
points; a range switch redraws; a hidden tab says "paused" and a visible one "live" again; a
dropped socket says "stale — reconnecting…" and comes back by itself; a user panel is created
through its form and draws its windows. Screenshots go to tests/browser/screenshots/live-*.png."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.browser.conftest import SCREENSHOTS

pytestmark = pytest.mark.browser
WAIT_MS = 30_000


def _login(page, server: str, user: str, password: str) -> None:
    page.goto(server + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(server + "/")


def _wait_live(page) -> None:
    page.wait_for_selector('.live-indicator[data-live-state="live"]', timeout=WAIT_MS)


def _wait_points(page, chart: str, at_least: int = 1) -> int:
    selector = f'[data-chart="{chart}"]'
    page.wait_for_function(
        "([sel, n]) => Number(document.querySelector(sel)?.dataset.points || 0) >= n",
        arg=[selector, at_least],
        timeout=WAIT_MS,
    )
    return int(page.locator(selector).get_attribute("data-points"))


def _set_hidden(page, hidden: bool) -> None:
    page.evaluate(
        """hidden => {
            Object.defineProperty(document, "hidden", {value: hidden, configurable: true});
            document.dispatchEvent(new Event("visibilitychange"));
        }""",
        hidden,
    )


def test_live_charts_on_overview_topic_and_group(operator_login, browser):
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    sockets = []  # the page's metrics sockets, passed through to the server

    def through(ws) -> None:
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r".*/ws/metrics/$"), through)
    _login(page, server, user, password)
    SCREENSHOTS.mkdir(exist_ok=True)

    _wait_live(page)
    _wait_points(page, "records_in", 3)
    _wait_points(page, "bytes_in", 3)
    assert page.locator(".live-chart .xtitle").first.text_content() == "time (UTC)"
    assert page.locator('[data-chart="records_in"] .ytitle').text_content() == "records/s"
    assert page.locator('[data-chart="bytes_in"] .ytitle').text_content() == "bytes/s"
    page.locator(".live").screenshot(path=str(SCREENSHOTS / "live-overview.png"))
    page.screenshot(path=str(SCREENSHOTS / "live-overview-page.png"), full_page=True)

    page.click('[data-range="300000"]')
    assert page.locator('[data-range="300000"]').get_attribute("aria-pressed") == "true"
    page.wait_for_function(
        "() => document.querySelector('[data-live-scope]').dataset.liveRange === '300000'"
    )
    _wait_points(page, "records_in", 1)

    _set_hidden(page, True)
    page.wait_for_selector('.live-indicator[data-live-state="paused"]')
    _set_hidden(page, False)
    _wait_live(page)

    sockets[-1].close()  # the connection drops: stale, then a reconnect (1 s backoff)
    page.wait_for_selector('.live-indicator[data-live-state="stale"]')
    assert page.locator(".live-indicator").inner_text() == "stale — reconnecting…"
    _wait_live(page)
    assert len(sockets) == 2

    page.goto(server + "/topics/orders/")
    _wait_live(page)
    _wait_points(page, "partition_in", 3)
    # the open second is drawn as it fills, not final (an open circle), between the ticks
    page.wait_for_function(
        """() => (document.querySelector('[data-chart="partition_in"]').data || [])
                   .some(t => t.meta && t.meta.open > 0)""",
        timeout=WAIT_MS,
    )
    # and the partitions table's end offsets follow the records as they are written
    row = 'tr[data-partition="0"]'
    before = int(page.locator(row).get_attribute("data-end-offset"))
    page.wait_for_function(
        "([sel, n]) => Number(document.querySelector(sel).dataset.endOffset) > n",
        arg=[row, before],
        timeout=WAIT_MS,
    )
    shown = page.locator(f"{row} .end-offset").inner_text()
    assert int(shown.replace(",", "")) > before
    # the figures that are not pushed say they are as of the page's load
    counted = page.locator(f"{row} .record-count")
    assert "as-loaded" in counted.get_attribute("class")
    assert "as of the page's load" in counted.get_attribute("title")
    page.screenshot(path=str(SCREENSHOTS / "live-topic.png"), full_page=True)

    page.goto(server + "/groups/order-fulfilment/")
    _wait_live(page)
    _wait_points(page, "group_lag", 2)
    _wait_points(page, "group_rate", 2)
    page.click("[data-theme-toggle]")  # the charts follow the theme
    page.wait_for_timeout(300)
    page.locator(".live").screenshot(path=str(SCREENSHOTS / "live-group-dark.png"))


def test_a_user_panel_is_created_and_draws(operator_login, browser):
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1300})
    _login(page, server, user, password)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.click("text=Panels")
    page.fill("#id_name", "Order value by status")
    page.select_option("#id_topic", "orders")
    page.select_option("#id_aggregation", "sum")
    page.click("#panel-form button[type=submit]")  # no value field: refused, next to the field
    page.wait_for_selector("#value_field-msg.field-error")
    assert "needs a field" in page.locator("#value_field-msg").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "live-panel-form-error.png"), full_page=True)

    page.fill("#id_value_field", "total")
    page.fill("#id_group_by", "status")
    page.fill("#id_size_s", "2")
    page.fill("#id_time_field", "ts")
    page.fill("#id_lateness_s", "2")
    page.fill("#id_out_of_orderness_s", "1")
    page.click("#panel-form button[type=submit]")
    page.wait_for_url("**/panels/*/")
    assert page.locator("h1").inner_text() == "Order value by status"
    _wait_live(page)
    _wait_points(page, "panel", 2)
    page.wait_for_function(
        "() => document.querySelector('[data-stat=watermark]').textContent.includes('UTC')",
        timeout=WAIT_MS,
    )
    page.screenshot(path=str(SCREENSHOTS / "live-panel.png"), full_page=True)


def _api_post(page, server: str, path: str, body) -> dict:
    """POST to the JSON API with the page's session (and its CSRF token)."""
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        server + path,
        data=json.dumps(body),
        headers={"Content-Type": "application/json", "X-CSRFToken": csrf, "Referer": server + "/"},
    )
    assert response.status == 201, response.text()
    return response.json()


def test_a_panel_shows_its_corrections_and_late_records(operator_login, browser):
    """A panel with 5 s of allowed lateness over 10-second windows: a record late within
    that grace corrects its window (listed, and counted), one after the window closed is
    counted late."""
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1300})
    _login(page, server, user, password)
    _api_post(page, server, "/api/v1/topics", {"name": "late-orders", "partitions": 1})
    t0 = int(time.time()) // 10 * 10 * 1000 - 60_000  # windows of 10 s start at t0

    def produce(*records: tuple[int, int]) -> None:
        body = [{"value": json.dumps({"total": total, "ts": t0 + at})} for at, total in records]
        _api_post(page, server, "/api/v1/topics/late-orders/records", body)

    produce((1000, 1), (12_000, 2))  # the watermark passes t0 + 10 s: [t0, t0 + 10 s) fires
    page.goto(server + "/panels/")
    page.fill("#id_name", "Late orders")
    page.select_option("#id_topic", "late-orders")
    page.select_option("#id_aggregation", "sum")
    page.fill("#id_value_field", "total")
    page.fill("#id_size_s", "10")
    page.fill("#id_time_field", "ts")
    page.fill("#id_lateness_s", "5")
    page.fill("#id_out_of_orderness_s", "0")
    page.click("#panel-form button[type=submit]")
    page.wait_for_url("**/panels/*/")
    _wait_live(page)
    page.wait_for_function(
        "() => document.querySelector('[data-stat=records_read]').textContent === '2'",
        timeout=WAIT_MS,
    )
    assert page.locator("[data-stat=corrections]").inner_text() == "0"

    produce((2000, 4))  # late, within the allowed lateness: a correction of the first window
    page.wait_for_function(
        "() => document.querySelector('[data-stat=corrections]').textContent === '1'",
        timeout=WAIT_MS,
    )
    correction = page.locator("[data-corrections] li").first.inner_text()
    assert correction.endswith("→ 5 (revision 1)"), correction
    assert page.locator("[data-stat=late_count]").inner_text() == "0"

    produce((20_000, 8), (3000, 16))  # the window closes at t0 + 15 s; then one too late
    page.wait_for_function(
        "() => document.querySelector('[data-stat=late_count]').textContent === '1'",
        timeout=WAIT_MS,
    )
    assert page.locator("[data-stat=corrections]").inner_text() == "1"
    assert page.locator("[data-stat=records_read]").inner_text() == "5"
    page.screenshot(path=str(SCREENSHOTS / "live-panel-late.png"), full_page=True)
