"""Groups with odd ids in Debian's Chromium against a real server: from the group list, a click
on each group's link opens that group's page, then its reset page and a preview. A browser
resolves ``.`` and ``..`` path segments and turns ``\\`` into ``/`` before it sends a request,
which the test client does not, so this is where those ids are proven reachable."""

from __future__ import annotations

import pytest

from tests.browser.conftest import SCREENSHOTS

pytestmark = pytest.mark.browser

ODD_IDS = ["..", ".", "a/b", "x/reset", "\\evil", "%2e%2e", "", "~", "new\nline", "50% off?#"]


@pytest.fixture
def odd_groups(tmp_path):
    """Before the server starts: the demo topics and a group per odd id, with offsets."""
    from streams.broker.demo import ensure_demo_topics
    from streams.groups import GroupCoordinator
    from streams.log import LogStore

    store = LogStore.open(tmp_path / "data", background=False)
    try:
        ensure_demo_topics(store)
        for i in range(10):
            store.append("orders", b'{"order": %d}' % i, partition=0)
        coordinator = GroupCoordinator(store)
        coordinator.load()
        for group_id in ODD_IDS:
            coordinator.commit_offsets(group_id, {("orders", 0): 5})
        coordinator.close()
    finally:
        store.close()
    return ODD_IDS


def _label(group_id: str) -> str:
    from brokerui.console.templatetags.tidelog_format import group_label

    return group_label(group_id)


def test_odd_group_ids_open_from_the_list(odd_groups, operator_login, browser):
    base, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")

    for group_id in odd_groups:
        page.goto(base + "/groups/")
        rows = page.locator("#group-table tr[data-group]")
        index = rows.evaluate_all(
            "(rows, id) => rows.findIndex(r => r.dataset.group === id)", group_id
        )
        assert index >= 0, f"{group_id!r} is not in the list"
        link = rows.nth(index).locator("td.grp-id a")
        link.click()
        page.wait_for_selector("h1.grp-title")
        assert page.locator("#group-live").get_attribute("data-state") == "Empty", group_id
        assert page.evaluate("document.querySelector('h1.grp-title').textContent") == _label(
            group_id
        ), (group_id, page.url)

        page.click("#reset-link")
        page.wait_for_selector("#reset-form")
        assert _label(group_id) in page.evaluate(
            "document.querySelector('.grp-crumbs').textContent"
        ), (group_id, page.url)
        page.check('input[name=strategy][value="to-earliest"]')
        page.click("#preview-button")
        page.wait_for_selector("#reset-preview")
        rows_text = page.locator("#reset-preview").inner_text()
        assert "orders" in rows_text, (group_id, rows_text)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "groups-odd-id-reset.png"), full_page=True)
