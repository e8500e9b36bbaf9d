"""Live charts and metric panels in Debian's Chromium against a real server with demo traffic:
the overview, a topic and a consumer group page connect their WebSocket, show "live" and draw
points; a range switch redraws; a hidden tab says "paused" and a visible one "live" again; a
dropped socket says "stale — reconnecting…" and comes back by itself; a user panel is created
through its form and draws its windows. Screenshots go to tests/browser/screenshots/live-*.png."""

from __future__ import annotations

import re

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
        arg=[selector, at_least], timeout=WAIT_MS,
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
    page.wait_for_function("() => document.querySelector('[data-live-scope]').dataset.liveRange"
                           " === '300000'")
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
    page.screenshot(path=str(SCREENSHOTS / "live-topic.png"), full_page=True)

    page.goto(server + "/groups/order-fulfilment/")
    _wait_live(page)
    _wait_points(page, "group_lag", 2)
    _wait_points(page, "group_rate", 2)
    page.wait_for_function(
        "() => document.querySelector('[data-eta-value]').textContent.trim() !== '–'",
        timeout=WAIT_MS)
    eta = page.locator("[data-eta-value]").inner_text()
    assert eta == "caught up" or eta == "not catching up" or eta.startswith("about ")
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
        timeout=WAIT_MS)
    page.screenshot(path=str(SCREENSHOTS / "live-panel.png"), full_page=True)
