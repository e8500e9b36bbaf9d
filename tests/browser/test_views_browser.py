"""The Views pages in Debian's Chromium against a real server with demo traffic, whose demo
jobs run in its process: the nav link, the list (rows, partitions served, freshness), the
revenue-per-country view's live table built from the SUBSCRIBE stream and updating as orders
come in, and a query by key showing the offsets and watermark the answer reflects; no CSP
violation or script error. Screenshots: /tmp/views-*.png (not committed)."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import logged_in_page

pytestmark = pytest.mark.browser
DEADLINE_MS = 60_000


def _shot(page, name: str) -> None:
    page.screenshot(path=f"/tmp/views-{name}.png", full_page=True)


def test_views_list_live_table_and_query(operator_login, browser):
    base, page, problems = logged_in_page(browser, operator_login)

    page.click("#nav-menu .nav-streams summary")  # the Streams dropdown of the top bar
    page.click("#nav-menu .nav-streams a:has-text('Views')")
    page.wait_for_url(base + "/views/")
    row = page.locator('tr[data-view="revenue-by-country/totals"]')
    assert "windowed aggregate" in row.inner_text()
    assert "3 / 3" in row.inner_text()  # the demo's embedded worker serves every partition
    assert page.locator('tr[data-view="search-ctr/ctr"]').count() == 1  # a table-table join
    _shot(page, "list")

    row.locator("a").click()
    page.wait_for_url(base + "/views/revenue-by-country/totals/")
    # the live table: a snapshot, then changes as the demo's orders are summed
    page.wait_for_selector("[data-view-table] tbody tr", timeout=DEADLINE_MS)
    first = page.locator("[data-view-progress]").get_attribute("data-progress")
    first_rows = page.locator("[data-view-table] tbody").inner_text()
    page.wait_for_function(
        "([p, rows]) => { const line = document.querySelector('[data-view-progress]');"
        " const body = document.querySelector('[data-view-table] tbody');"
        " return line.dataset.progress !== p && body.innerText !== rows; }",
        arg=[first, first_rows],
        timeout=DEADLINE_MS,
    )
    line = page.locator("[data-view-progress]").inner_text()
    assert "rows · complete up to" in line and "reflects input offsets orders-enriched" in line
    assert "watermark" in line and "UTC" in line
    headers = page.locator("[data-view-table] thead th").all_inner_texts()
    assert headers[:1] == ["Key"]
    assert {"start (UTC)", "end (UTC)", "revenue_eur", "orders"} <= set(headers)
    assert page.locator(".live-indicator").inner_text() == "live"
    _shot(page, "live")

    # a query by key: that country's windows, with what the answer reflects
    key = json.loads(page.locator("[data-view-table] tbody tr").first.get_attribute("data-key"))
    country = key[0]
    page.fill("#q-key", country)
    page.click("#q-submit")
    page.wait_for_selector("#view-token")
    result = page.locator("#view-result")
    keys = result.locator("tbody tr td:first-child").all_inner_texts()
    assert keys and all(json.loads(k)[0] == country for k in keys)
    token = page.locator("#view-token").inner_text()
    assert "reflects input offsets orders-enriched" in token and "as of" in token
    assert f"key={country}" in page.url  # the query is in the address: a link to share
    _shot(page, "query")

    # a wait that cannot be met says so (bounded, here 100 ms)
    page.fill("#q-key", country)
    page.locator("main details summary").click()
    page.fill("#q-wait-for", "orders-enriched:0:999999999")
    page.fill("input[name=timeout_ms]", "100")
    page.click("#q-submit")
    page.wait_for_selector("#view-error")
    assert "did not reach" in page.locator("#view-error").inner_text()
    _shot(page, "wait-error")
    assert problems == []
