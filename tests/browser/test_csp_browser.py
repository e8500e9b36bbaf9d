"""The Content-Security-Policy in Debian's Chromium against a real server with demo traffic:
every main page (overview, topics, a topic, its messages and produce form, topic create and
delete, consumer groups, a group and its offset reset, panels and a panel, audit log, account
pages, API docs, an error page) is served with the policy and raises no violation (listened
for as `securitypolicyviolation` events and console messages), while the Plotly charts draw
and htmx's actions (live validation, previews, polling) still work. Screenshots go to
tests/browser/screenshots/csp-*.png."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.browser.conftest import REPO_DIR, SCREENSHOTS

pytestmark = pytest.mark.browser
WAIT_MS = 30_000

# Installed before any script of each page: every violation and every refused eval by htmx.
SPY = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", e => window.__violations.push(
  `${e.effectiveDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`
  + ` ${e.sample || ""}`));
document.addEventListener("htmx:evalDisallowedError", e => window.__violations.push(
  "htmx wanted eval on " + e.target.outerHTML.slice(0, 160)));
"""
CSP_WORDS = re.compile(r"Content Security Policy|Refused to|strict CSP|unsafe-eval", re.I)


class Pages:
    """A logged-in page that checks each document for the policy and for violations."""

    def __init__(self, browser, base: str):
        self.base = base
        self.page = browser.new_page(viewport={"width": 1280, "height": 1000})
        self.page.add_init_script(SPY)
        self.console: list[str] = []
        self.page.on("console", lambda message: self.console.append(message.text))
        self.policies: dict[str, str] = {}
        self.page.on("response", self._response)

    def _response(self, response) -> None:
        if response.request.resource_type == "document":
            self.policies[response.url] = response.headers.get("content-security-policy", "")

    def go(self, path: str):
        response = self.page.goto(self.base + path)
        assert response is not None
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, (path, policy)
        return response

    def assert_clean(self, where: str) -> None:
        """No violation on the current page and none reported on the console so far."""
        violations = self.page.evaluate("() => window.__violations")
        assert violations == [], (where, violations)
        bad = [line for line in self.console if CSP_WORDS.search(line)]
        assert bad == [], (where, bad)

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"csp-{name}.png"), full_page=True)

    def wait_points(self, chart: str, at_least: int = 1) -> None:
        self.page.wait_for_function(
            "([sel, n]) => Number(document.querySelector(sel)?.dataset.points || 0) >= n",
            arg=[f'[data-chart="{chart}"]', at_least],
            timeout=WAIT_MS,
        )
        # drawn by Plotly: an SVG with axes, laid out by its stylesheet (static, not inline)
        figure = self.page.locator(f'[data-chart="{chart}"]')
        assert figure.locator("svg.main-svg .xtitle").count() == 1
        position = figure.locator("svg.main-svg").first.evaluate(
            "svg => getComputedStyle(svg).position"
        )
        assert position == "absolute"  # `.js-plotly-plot .plotly .main-svg` from the CSS file


def _login(pages: Pages, user: str, password: str) -> None:
    pages.go("/accounts/login/")
    pages.assert_clean("login")
    pages.page.fill("input[name=username]", user)
    pages.page.fill("input[name=password]", password)
    pages.page.click("main button[type=submit]")
    pages.page.wait_for_url(pages.base + "/")


def _htmx_requests(page, path_prefix: str) -> list[str]:
    seen: list[str] = []

    def on_request(request) -> None:
        if request.headers.get("hx-request") == "true" and path_prefix in request.url:
            seen.append(request.url)

    page.on("request", on_request)
    return seen


def _set_hidden(page, hidden: bool) -> None:
    page.evaluate(
        """hidden => {
            Object.defineProperty(document, "visibilityState",
                                  {value: hidden ? "hidden" : "visible", configurable: true});
            Object.defineProperty(document, "hidden", {value: hidden, configurable: true});
            document.dispatchEvent(new Event("visibilitychange"));
        }""",
        hidden,
    )


def test_every_page_runs_under_the_policy_with_charts_and_htmx_working(operator_login, browser):
    base, user, password = operator_login
    pages = Pages(browser, base)
    page = pages.page
    _login(pages, user, password)

    # overview: live charts drawn by Plotly
    pages.wait_points("records_in", 2)
    pages.wait_points("bytes_in", 2)
    pages.assert_clean("overview")
    pages.shot("overview")

    # topics: the live filter (htmx)
    pages.go("/topics/")
    page.fill("input[name=q]", "page-v")
    page.wait_for_function(
        "() => !document.querySelector('#topic-table, table').innerText.includes('orders')",
        timeout=WAIT_MS,
    )
    assert "page-views" in page.locator("main").inner_text()
    pages.assert_clean("topics")

    # a topic, with its per-partition live charts
    pages.go("/topics/orders/")
    pages.wait_points("partition_in", 1)
    pages.assert_clean("topic")
    pages.shot("topic")

    # messages and produce
    pages.go("/topics/orders/messages/")
    page.wait_for_selector("#record-rows tr[data-offset]", timeout=WAIT_MS)
    pages.assert_clean("messages")
    pages.go("/topics/orders/produce/")
    page.wait_for_selector("form.produce-form")
    pages.assert_clean("produce")

    # create a topic: htmx validates the name as it is typed
    pages.go("/new-topic/")
    page.fill("#id_name", "bad name!")
    page.wait_for_selector("#name-msg.field-error", timeout=WAIT_MS)
    page.fill("#id_name", "csp-check")
    page.wait_for_selector("#name-msg:not(.field-error)", timeout=WAIT_MS)
    pages.assert_clean("create")
    page.click("form.topic-form button[type=submit]")
    page.wait_for_url("**/topics/csp-check/")
    pages.assert_clean("created")

    # delete it: the typed-name check moved from an inline script to static/js/console.js
    pages.go("/topics/csp-check/delete/")
    assert page.locator("#delete-button").is_disabled()
    page.fill("#id_confirm", "csp-chec")
    assert page.locator("#delete-button").is_disabled()
    page.fill("#id_confirm", "csp-check")
    assert page.locator("#delete-button").is_enabled()
    pages.shot("delete")
    pages.assert_clean("delete")
    page.click("#delete-button")
    page.wait_for_url("**/topics/")
    assert "Deleted topic csp-check" in page.locator(".messages").inner_text()
    assert "csp-check" not in page.locator("#topic-table").inner_text()

    # groups: htmx polls the table while the tab is visible, not while it is hidden
    pages.go("/groups/")
    polls = _htmx_requests(page, "/groups/")
    page.wait_for_function("() => document.querySelector('#group-table')", timeout=WAIT_MS)
    deadline = time.monotonic() + 20
    while not polls and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    assert polls, "the group table was never refreshed"
    _set_hidden(page, True)
    page.wait_for_timeout(500)  # a request already on its way
    polls.clear()
    page.wait_for_timeout(11_000)  # two poll periods (5 s)
    assert polls == [], "a hidden tab kept polling"
    _set_hidden(page, False)
    deadline = time.monotonic() + 20
    while not polls and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    assert polls, "polling did not resume when the tab became visible"
    pages.assert_clean("groups")

    # a group with its live charts, and its offset reset: presets (static JS) and the preview
    group = page.locator("#group-table td.grp-id a").first.inner_text().strip()
    pages.go(f"/groups/{group}/")
    pages.wait_points("group_lag", 1)
    pages.assert_clean("group")
    pages.shot("group")
    pages.go(f"/groups/{group}/reset/")
    page.check('input[name=strategy][value="by-duration"]')
    page.click('button[data-duration="PT15M"]')
    assert page.input_value("input[name=duration]") == "PT15M"
    page.click("#preview-button")
    page.wait_for_selector("#reset-preview", timeout=WAIT_MS)
    pages.assert_clean("group reset")
    pages.shot("group-reset")

    # a metric panel, drawn live
    pages.go("/panels/")
    page.fill("#id_name", "CSP panel")
    page.select_option("#id_topic", "orders")
    page.select_option("#id_aggregation", "count")
    page.fill("#id_size_s", "2")
    page.click("#panel-form button[type=submit]")
    page.wait_for_url("**/panels/*/")
    pages.wait_points("panel", 1)
    pages.assert_clean("panel")
    pages.shot("panel")

    # audit log, account pages, API docs, an error page
    pages.go("/audit/")
    page.fill("input[name=action]", "topic.")
    page.wait_for_timeout(1000)
    pages.assert_clean("audit")
    pages.go("/accounts/")
    page.click("text=Create a token")
    page.wait_for_selector("#new-token")
    page.once("dialog", lambda dialog: dialog.accept())  # data-confirm, from console.js
    page.click("text=Revoke token")
    page.wait_for_selector("text=API token revoked")
    pages.assert_clean("account")
    pages.shot("account")
    pages.go("/accounts/password_change/")
    pages.assert_clean("password change")
    pages.shot("password-change")
    pages.go("/api/v1/docs")
    assert (
        page.locator(".api-docs .method").first.evaluate("el => getComputedStyle(el).fontWeight")
        == "700"
    )  # its styles moved from an inline <style> to tidelog.css
    pages.assert_clean("api docs")
    response = pages.go("/no/such/page/")
    assert response.status == 404
    pages.assert_clean("404")
    pages.shot("404")

    assert all("script-src 'self'" in p for p in pages.policies.values()), pages.policies


PLOTLY_JS = REPO_DIR / "static/vendor/plotly-basic-4.1.1.min.js"
PLOTLY_CSS = REPO_DIR / "static/vendor/plotly-basic-4.1.1.css"


def test_the_plotly_stylesheet_holds_the_rules_plotly_would_insert(browser, tmp_path):
    """Without the policy, Plotly inserts its global rules into a <style>; the static
    stylesheet that stands in for it under the policy must hold the same rules."""
    page = browser.new_page()
    page.set_content('<div id="g" style="width:600px;height:300px"></div>')
    page.add_script_tag(path=str(PLOTLY_JS))
    page.evaluate(
        """() => Plotly.react("g", [{x: [1, 2, 3], y: [2, 1, 3], type: "scatter"},
                                    {x: [1, 2], y: [1, 2], type: "bar"}],
                              {title: {text: "t"}}, {displayModeBar: false})"""
    )
    inserted = page.evaluate(
        """() => [...document.getElementById("plotly.js-style-global").sheet.cssRules]
                 .map(r => r.cssText).sort()"""
    )
    page.set_content("<p>x</p>")
    page.add_style_tag(content=Path(PLOTLY_CSS).read_text())
    ours = page.evaluate("() => [...document.styleSheets[0].cssRules].map(r => r.cssText).sort()")
    assert inserted and ours == inserted
