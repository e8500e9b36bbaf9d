"""The message browser's live tail in Debian's Chromium against a real server (Daphne): switched
on, records produced from another tab appear on top within moments, marked new and counted; a
filter applies to them; paused, nothing more comes; resumed, what was written meanwhile
arrives. Screenshots go to tests/browser/screenshots/tail-*.png."""

from __future__ import annotations

import pytest

from tests.browser.conftest import SCREENSHOTS, logged_in_page

pytestmark = pytest.mark.browser
WAIT_MS = 15_000


def _produce(page, base: str, topic: str, lines: list[str]) -> None:
    page.goto(f"{base}/topics/{topic}/produce/")
    page.fill("textarea[name=value]", "\n".join(lines))
    if len(lines) > 1:
        page.check("input[name=per_line]")
    page.click("form.produce-form button[type=submit]")
    page.wait_for_selector(".produce-results h2")


def _values(page) -> list[str]:
    return page.locator("#record-rows tr[data-offset] pre.value").all_inner_texts()


def test_live_tail_shows_new_records_on_top_pauses_and_resumes(browser, operator_login):
    base, page, problems = logged_in_page(browser, operator_login, width=1440, height=1000)
    page.goto(base + "/new-topic/")
    page.fill("input[name=name]", "tail-demo")
    page.fill("input[name=partitions]", "2")
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/topics/tail-demo/")
    writer = browser.new_page()  # another tab of the same user (its own sign-in)
    writer.goto(base + "/accounts/login/")
    writer.fill("input[name=username]", operator_login[1])
    writer.fill("input[name=password]", operator_login[2])
    writer.click("main button[type=submit]")
    writer.wait_for_url(base + "/")
    _produce(writer, base, "tail-demo", ['{"n": 1, "kind": "old"}'])

    page.goto(base + "/topics/tail-demo/messages/?seek=newest&field=value&op=contains&text=keep")
    page.click("[data-tail-toggle]")
    page.wait_for_function(
        "() => document.querySelector('[data-tail-status]').textContent.includes('live')"
    )
    _produce(writer, base, "tail-demo", ['{"n": 2, "kind": "keep"}', '{"n": 3, "kind": "drop"}',
                                         '{"n": 4, "kind": "keep"}'])  # fmt: skip
    page.wait_for_function(
        "() => document.querySelectorAll('#record-rows tr.tail-new').length === 2",
        timeout=WAIT_MS,
    )
    values = _values(page)
    assert [v for v in values if '"n": 4' in v or '"n": 2' in v] == values[:2]  # on top
    assert not any('"drop"' in v for v in values)  # the page's filter, applied to new ones
    assert "2 new records" in page.locator("[data-tail-status]").inner_text()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "tail-live.png"), full_page=True)

    page.click("[data-tail-toggle]")  # pause
    page.wait_for_function(
        "() => document.querySelector('[data-tail-status]').textContent.startsWith('paused')"
    )
    assert page.locator("[data-tail-toggle]").inner_text() == "Resume"
    _produce(writer, base, "tail-demo", ['{"n": 5, "kind": "keep"}'])
    page.wait_for_timeout(1500)
    assert page.locator("#record-rows tr.tail-new").count() == 2  # paused: nothing came
    page.click("[data-tail-toggle]")  # resume: what was written meanwhile arrives
    page.wait_for_function(
        "() => document.querySelectorAll('#record-rows tr.tail-new').length === 3",
        timeout=WAIT_MS,
    )
    assert '"n": 5' in _values(page)[0]
    page.screenshot(path=str(SCREENSHOTS / "tail-resumed.png"), full_page=True)
    assert problems == []
