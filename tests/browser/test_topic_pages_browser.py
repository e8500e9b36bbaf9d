"""The topic pages in Debian's Chromium against a real server: overview, list with a live
filter, create (a refused config first, then a good one), detail, edit config, purge with its
preview, delete with the typed name. Screenshots in light and dark go to
tests/browser/screenshots/topics-*.png for people to look at."""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import REPO_DIR, SCREENSHOTS  # noqa: F401

pytestmark = pytest.mark.browser


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"topics-{name}.png"), full_page=True)


def _login(page, base: str, user: str, password: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")


def test_topic_pages(operator_login, browser):
    base, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    _login(page, base, user, password)

    # the overview fills with the demo traffic
    deadline = time.monotonic() + 60
    while "page-views" not in page.locator("#overview").inner_text():
        if time.monotonic() > deadline:
            pytest.fail("the demo topics never showed on the overview")
        time.sleep(0.5)
        page.reload()
    time.sleep(2)
    page.reload()
    assert page.locator("h1").inner_text() == "Overview"
    _shot(page, "overview")

    # list, and the live filter (htmx) narrowing it without a page load
    page.goto(base + "/topics/")
    assert page.locator("tr[data-topic]").count() >= 2
    _shot(page, "list")
    page.fill("input[name=q]", "page-v")  # "order" matches the demo jobs' topics too now
    page.wait_for_function("() => document.querySelectorAll('tr[data-topic]').length === 1")
    assert "q=page-v" in page.url
    assert page.locator("tr[data-topic]").first.get_attribute("data-topic") == "page-views"

    # create: a config the engine refuses, shown next to its field, typed values kept
    page.goto(base + "/new-topic/")
    page.fill("input[name=name]", "bad name!")
    page.wait_for_selector("#name-msg.field-error")
    assert "contains" in page.locator("#name-msg").inner_text()
    page.fill("input[name=name]", "browser-test")
    page.wait_for_selector("#name-msg.field-ok")
    page.fill("input[name=partitions]", "4")
    page.check("input[name=retention_ms][value='3600000']")
    page.fill("input[name=segment_bytes]", "64 MB")
    page.fill("textarea[name=configs]", "compression.type=zstd\nretention.msx=5")
    page.wait_for_selector("#configs-msg.field-error")
    assert "did you mean retention.ms" in page.locator("#configs-msg").inner_text()
    _shot(page, "create-live-error")
    page.click("main button[type=submit]")
    assert page.locator("#configs-msg.field-error").count() == 1
    assert page.input_value("input[name=segment_bytes]") == "64 MB"
    _shot(page, "create-refused")
    page.fill("textarea[name=configs]", "compression.type=zstd")
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/topics/browser-test/")
    assert page.locator("tr[data-partition]").count() == 4
    assert page.locator("tr[data-override]").count() == 3  # retention.ms, segment.bytes, zstd

    # detail of a demo topic with traffic
    page.goto(base + "/topics/orders/")
    assert page.locator("tr[data-partition]").count() == 3
    _shot(page, "detail")

    # edit config
    page.goto(base + "/topics/browser-test/config/")
    page.fill("input[name='segment.bytes']", "tiny")
    page.wait_for_selector("#cfg-segment-bytes-msg.field-error")
    _shot(page, "config-live-error")
    page.fill("input[name='segment.bytes']", "")
    page.fill("input[name='retention.ms']", "2d")
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/topics/browser-test/")
    assert "retention.ms=172800000" in page.locator(".messages").inner_text()
    assert "segment.bytes reset" in page.locator(".messages").inner_text()

    # purge, with the preview computed while choosing
    page.goto(base + "/topics/orders/purge/")
    page.check("input[name=mode][value=all]")
    page.wait_for_selector("#purge-preview .preview-total")
    _shot(page, "purge")
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/topics/orders/")
    assert "Purged" in page.locator(".messages").inner_text()

    # delete: the button waits for the typed name
    page.goto(base + "/topics/browser-test/delete/")
    assert page.is_disabled("#delete-button")
    page.fill("input[name=confirm]", "browser-test")
    assert page.is_enabled("#delete-button")
    _shot(page, "delete")
    page.click("#delete-button")
    page.wait_for_url(base + "/topics/")
    assert page.locator("tr[data-topic='browser-test']").count() == 0

    # dark theme, as the system prefers it and as the toggle saves it
    dark = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    _login(dark, base, user, password)
    dark.evaluate("localStorage.setItem('tidelog-theme', 'dark')")
    for name, path in (
        ("overview", "/"),
        ("list", "/topics/"),
        ("detail", "/topics/page-views/"),
        ("create", "/new-topic/"),
    ):
        dark.goto(base + path)
        _shot(dark, f"{name}-dark")
