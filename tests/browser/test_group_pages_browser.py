"""The consumer group pages in Debian's Chromium against a real server with demo traffic: the
list, a live group's detail refreshing itself, the offset reset of the live group (preview,
CSV, apply disabled and — forced — refused), the reset of an Empty group through the preview to
the result, and the audit log. Screenshots go to tests/browser/screenshots/groups-*.png."""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import REPO_DIR, SCREENSHOTS  # noqa: F401

pytestmark = pytest.mark.browser
MINUTE = 60_000


@pytest.fixture
def empty_group(tmp_path):
    """Before the server starts (so list it first): the demo topics, with an hour of orders,
    and a group "billing-export" that is Empty, with offsets, one of them behind retention."""
    from streams.broker.demo import ensure_demo_topics
    from streams.groups import GroupCoordinator
    from streams.log import LogStore

    store = LogStore.open(tmp_path / "data", background=False)
    try:
        ensure_demo_topics(store)
        now = int(time.time() * 1000)
        for p in range(3):
            for i in range(40 + 15 * p):
                store.append(
                    "orders",
                    b'{"order": %d}' % i,
                    key=b"k%d" % i,
                    partition=p,
                    timestamp_ms=now - (60 - i) * MINUTE,
                )
        coordinator = GroupCoordinator(store)
        coordinator.load()
        coordinator.commit_offsets(
            "billing-export", {("orders", 0): 12, ("orders", 1): 55, ("orders", 2): 30}
        )
        store.delete_records("orders", {2: 35})
        coordinator.close()
    finally:
        store.close()
    return "billing-export"


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"groups-{name}.png"), full_page=True)


def _preview(page, strategy: str, **values) -> None:
    page.check(f'input[name=strategy][value="{strategy}"]')
    for name, value in values.items():
        page.fill(f"input[name={name}]", value)
    page.click("#preview-button")
    page.wait_for_selector("#reset-preview")


def _login(browser, base: str, user: str, password: str, scheme: str = "light"):
    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")
    return page


def test_group_pages(empty_group, operator_login, browser):
    base, user, password = operator_login
    page = _login(browser, base, user, password)

    # the list: the demo consumer group joins and commits within a few seconds
    deadline = time.monotonic() + 60
    while True:
        page.goto(base + "/groups/")
        live = page.locator('tr[data-group="order-fulfilment"][data-state="Stable"]')
        if live.count():
            break
        if time.monotonic() > deadline:
            pytest.fail("the demo group order-fulfilment did not become Stable in 60 s")
        time.sleep(0.5)
    assert page.locator('tr[data-group="billing-export"][data-state="Empty"]').count() == 1
    assert "behind retention" in page.locator('tr[data-group="billing-export"]').inner_text()
    _shot(page, "list")

    # the live group's detail: its member, the partitions it owns, refreshing itself
    page.click('a:text-is("order-fulfilment")')
    page.wait_for_selector("#group-live")
    member_row = page.locator("tr[data-member]")
    assert member_row.count() == 1 and "fulfilment-1" in member_row.inner_text()
    assert page.locator('section[data-topic="orders"] tbody tr').count() == 3
    assert page.locator("#delete-group").is_disabled()
    freshness = page.locator("#group-live .freshness").inner_text()
    page.wait_for_function(
        "old => document.querySelector('#group-live .freshness').innerText !== old",
        arg=freshness,
        timeout=15_000,
    )  # htmx polled and swapped in a newer view
    page.check("#lag-only")
    page.wait_for_url("**/groups/order-fulfilment/?lag=1")
    _shot(page, "detail")

    # reset of the live group: preview allowed, apply disabled and saying why
    page.goto(base + "/groups/order-fulfilment/reset/")
    page.check('input[name=strategy][value="by-duration"]')
    page.click('button[data-duration="PT15M"]')
    assert page.input_value("input[name=duration]") == "PT15M"
    page.click("#preview-button")
    page.wait_for_selector("#reset-preview")
    assert page.locator("#apply-button").is_disabled()
    reason = page.locator("#gate-reason").inner_text()
    assert "Stable" in reason and "fulfilment-1" in reason
    with page.expect_download() as download:
        page.click("#download-csv")
    assert download.value.suggested_filename.startswith("order-fulfilment-reset-by-duration-")
    with open(download.value.path()) as f:
        assert f.readline().startswith("topic,partition,new_offset,current_offset")
    _shot(page, "reset-disabled")
    # the button is only a hint: forced, the coordinator refuses, and the page says so
    page.once("dialog", lambda dialog: dialog.accept())
    page.evaluate(  # in one go: the gate polls and would disable it again
        "() => { const b = document.querySelector('#apply-button');"
        " b.disabled = false; b.click(); }"
    )
    page.wait_for_selector("#reset-refused")
    assert "not Empty" in page.locator("#reset-refused").inner_text()
    # the header's state was swapped (out of band) for the refusal's own, not duplicated
    assert page.locator("#reset-group-state").count() == 1
    assert page.locator(".page-head #reset-group-state").inner_text() == "Stable"
    _shot(page, "reset-refused")

    # reset of the Empty group: preview with clamps, apply, result
    page.goto(base + "/groups/billing-export/reset/")
    _preview(page, "shift-by", shift="-20")
    targets = page.locator("#reset-preview tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.partition, r.dataset.current, r.dataset.target])"
    )
    assert targets == [["0", "12", "0"], ["1", "55", "35"], ["2", "30", "35"]]
    assert page.locator("#reset-preview").inner_text().count("clamped") == 2
    assert page.locator("#apply-button").is_enabled()
    _shot(page, "reset-preview")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#apply-button")
    page.wait_for_selector("#reset-applied")
    _shot(page, "reset-applied")
    page.goto(base + "/groups/billing-export/")
    committed = page.locator('section[data-topic="orders"] tbody tr').evaluate_all(
        "rows => rows.map(r => r.children[1].innerText.trim())"
    )
    assert committed == ["0", "35", "35"]

    # the audit log, filtered to resets
    page.goto(base + "/audit/?action=group.reset")
    actions = page.locator("tr[data-action]").evaluate_all(
        "rows => rows.map(r => r.dataset.action)"
    )
    assert actions == ["group.reset", "group.reset.refused"]
    _shot(page, "audit")

    dark = _login(browser, base, user, password, scheme="dark")
    dark.goto(base + "/groups/order-fulfilment/")
    _shot(dark, "detail-dark")
    dark.goto(base + "/groups/billing-export/reset/")
    _preview(dark, "to-offset", offset="50")
    _shot(dark, "reset-preview-dark")
