"""In Chromium against the real server with demo traffic: a demo group's status (Burrow's
rules) with its reason and lag figures; an alert rule created in the form, fired by the
server's broker to a real HTTP receiver, shown firing on the overview, then deleted through
its confirmation page. Screenshots go to /tmp/lag-*.png (looked at, never committed)."""

from __future__ import annotations

import pytest

from tests.alerts.receiver import receiver

pytestmark = pytest.mark.browser
WAIT_MS = 60_000
STATUSES = {"OK", "WARN", "STALL", "STOP", "REWIND", "ERR"}


def _login(page, server: str, user: str, password: str) -> None:
    page.goto(server + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(server + "/")


def test_group_status_and_an_alert_rule_end_to_end(operator_login, browser):
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    _login(page, server, user, password)

    # the group page judges the demo group once the broker has sampled its commits
    page.goto(server + "/groups/search-analytics/")
    page.wait_for_function(
        "() => { const b = document.querySelector('#group-health [data-status]');"
        " return b && b.dataset.status; }",
        timeout=WAIT_MS,
    )
    status = page.locator("#group-health [data-status]").first.get_attribute("data-status")
    assert status in STATUSES
    assert page.locator("#health-reason").inner_text().strip()
    assert page.locator("#catch-up").inner_text().strip()
    assert "not catching up" not in page.content()
    page.screenshot(path="/tmp/lag-group.png", full_page=True)
    page.click("[data-theme-toggle]")
    page.click("#group-health details summary")
    page.wait_for_timeout(300)
    page.locator("#group-live").screenshot(path="/tmp/lag-group-dark.png")
    page.click("[data-theme-toggle]")

    with receiver() as hook:
        page.goto(server + "/alerts/new/")
        page.fill("#id_name", "fulfilment behind")
        page.select_option("#id_scope", "group")
        page.fill("#id_target", "order-fulfilment")
        page.select_option("#id_condition", "lag")
        page.fill("#id_threshold", "0")
        page.fill("#id_for_min", "0")
        page.fill("#id_webhook_url", hook.url)
        page.select_option("#id_webhook_format", "slack")
        page.click("#alert-form button[type=submit]")
        page.wait_for_url(server + "/alerts/")
        body = hook.next(timeout=60)  # the server's broker evaluated it and posted
        assert set(body) == {"text"} and "FIRING fulfilment behind" in body["text"]

        page.goto(server + "/")
        page.wait_for_selector("#alerts-firing", timeout=WAIT_MS)
        assert "fulfilment behind" in page.locator("#alerts-firing").inner_text()
        page.screenshot(path="/tmp/lag-overview.png", full_page=True)

        page.goto(server + "/alerts/")
        page.screenshot(path="/tmp/lag-alerts.png", full_page=True)
        page.click("#rules a:has-text('delete…')")
        page.wait_for_selector("#delete-button")
        page.screenshot(path="/tmp/lag-alert-delete.png")
        page.click("#delete-button")
        page.wait_for_url(server + "/alerts/")
        assert page.locator("#no-rules").is_visible()
