"""A saved search in Debian's Chromium against the real server with demo traffic: the query is
checked as it is typed (the error with its position, then how a valid one is read), saved, and
its matches arrive live on its page over the WebSocket (rows added without a reload); then it
is deleted through its confirmation page. Screenshots go to /tmp/search-*.png (looked at,
never committed)."""

from __future__ import annotations

import secrets

import pytest

pytestmark = pytest.mark.browser
WAIT_MS = 60_000


def _login(page, server: str, user: str, password: str) -> None:
    page.goto(server + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(server + "/")


def _rows(page) -> int:
    return page.locator("#matches tbody tr").count()


def test_write_check_save_watch_and_delete_a_saved_search(operator_login, browser):
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    _login(page, server, user, password)
    name = f"Top clicks {secrets.token_hex(3)}"

    page.goto(server + "/searches/")
    page.fill("#id_name", name)
    page.fill("#id_topic", "clicks")
    page.fill("#id_query", "position:[1 TO 2] AND (sku:")
    page.wait_for_selector('#query-check [data-check="error"]', timeout=WAIT_MS)
    check = page.locator("#query-check").inner_text()
    assert "ends too early" in check and "at the end" in check
    page.fill("#id_query", "position:[1 TO 2] AND sku~")
    page.wait_for_selector('#query-check [data-position="22"]', timeout=WAIT_MS)
    assert "fuzzy terms (~) are not supported" in page.locator("#query-check").inner_text()
    pointer = page.locator("#query-check .query-pointer").inner_text().splitlines()
    assert pointer[1].index("^") == 22
    page.screenshot(path="/tmp/search-invalid.png", full_page=True)

    page.fill("#id_query", "position:[1 TO 2] AND sku:*")
    page.wait_for_selector('#query-check [data-check="ok"]', timeout=WAIT_MS)
    assert "(position:[1 TO 2] AND sku:*)" in page.locator("#query-check").inner_text()
    page.screenshot(path="/tmp/search-valid.png", full_page=True)
    page.click("#save-search")
    page.wait_for_selector('.live-indicator[data-live-state="live"]', timeout=WAIT_MS)
    assert page.locator("h1").inner_text() == name

    # the demo's clicks keep coming: rows arrive over the socket, no reload
    page.wait_for_function(
        "() => document.querySelectorAll('#matches tbody tr').length >= 1", timeout=WAIT_MS
    )
    first = _rows(page)
    page.wait_for_function(
        "n => document.querySelectorAll('#matches tbody tr').length > n",
        arg=first,
        timeout=WAIT_MS,
    )
    cells = page.locator("#matches tbody tr").first.locator("td").all_inner_texts()
    assert '"position":1' in cells[2] or '"position":2' in cells[2]
    assert '"position":3' not in page.locator("#matches tbody").inner_text()
    page.screenshot(path="/tmp/search-live.png", full_page=True)

    page.click("#delete-search")
    page.wait_for_selector("#delete-button")
    page.screenshot(path="/tmp/search-delete.png", full_page=True)
    page.click("#delete-button")
    page.wait_for_url(server + "/searches/")
    assert name not in page.locator("main").inner_text().split("Deleted")[0].replace(
        f"Saved search “{name}” deleted.", ""
    )
