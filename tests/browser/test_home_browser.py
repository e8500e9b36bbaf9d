"""The real server, as `make run` starts it, seen through Debian's Chromium.

Starts `manage.py runserver` (Daphne) on a free loopback port with a fresh data directory and
demo traffic on, logs in, opens the overview at `/`, waits for the demo topics to fill, checks
their partitions on the topic pages, and keeps a screenshot in tests/browser/screenshots/ for
people to look at.
"""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import SCREENSHOTS

pytestmark = pytest.mark.browser


def _records(page, topic: str) -> int:
    row = page.locator(f'#overview tr[data-topic="{topic}"]')
    return int(row.get_attribute("data-records")) if row.count() else 0


def _end_offsets(page) -> list[int]:
    rows = page.locator("tr[data-end-offset]")
    return [int(v) for v in rows.evaluate_all("rows => rows.map(r => r.dataset.endOffset)")]


def test_home_shows_demo_topics_filling_up(operator_login, browser):
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(server + "/")
    assert "/accounts/login/" in page.url  # login required everywhere
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(server + "/")

    deadline = time.monotonic() + 120  # the demo's first records, on a loaded machine too
    while True:
        page.goto(server + "/")
        if _records(page, "orders") > 0 and _records(page, "page-views") > 0:
            break
        if time.monotonic() > deadline:
            pytest.fail("demo topics did not fill in 120 s")
        time.sleep(0.5)

    assert page.title() == "Overview · Tidelog"
    assert page.locator("h1").inner_text() == "Overview"
    background = page.locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
    assert background != "rgba(0, 0, 0, 0)", "the stylesheet did not load"

    page.goto(server + "/topics/orders/")
    offsets = _end_offsets(page)
    assert len(offsets) == 3 and sum(offsets) > 0
    page.goto(server + "/topics/page-views/")
    assert len(_end_offsets(page)) == 6

    SCREENSHOTS.mkdir(exist_ok=True)
    page.goto(server + "/")
    page.screenshot(path=str(SCREENSHOTS / "home.png"), full_page=True)
