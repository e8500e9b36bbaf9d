"""Narrow windows (a 375 px wide phone) and the small things around them, in Debian's Chromium
against a real server with demo traffic: no page is wider than the window, the top bar folds
into a menu that opens and closes, wide tables scroll sideways inside their wrapper, the
favicon is served, and a hex dump's ASCII column is never cut off (in the message browser at
phone and desktop widths, and on a record's page, where a phone gets two rows of 8 bytes a line).
Screenshots go to tests/browser/screenshots/narrow-*.png."""

from __future__ import annotations

import pytest

from tests.browser.conftest import SCREENSHOTS, ServerProcess

pytestmark = pytest.mark.browser
WAIT_MS = 30_000
PHONE = {"width": 375, "height": 812}
DESKTOP = {"width": 1280, "height": 900}
PAGES = [
    "/",
    "/topics/",
    "/topics/orders/",
    "/topics/orders/messages/",
    "/topics/orders/messages/?view=hex",
    "/topics/orders/produce/",
    "/new-topic/",
    "/topics/orders/config/",
    "/topics/orders/purge/",
    "/groups/",
    "/transactions/",
    "/jobs/",
    "/jobs/search-ctr/stop/",
    "/searches/",
    "/dual-writes/",
    "/capture/",
    "/topics/orders/messages/?markers=1&read=committed",
    "/panels/",
    "/views/",
    "/views/revenue-by-country/totals/?key=DE",
    "/alerts/",
    "/alerts/new/",
    "/audit/",
    "/accounts/",
    "/accounts/password_change/",
    "/api/v1/docs",
]


@pytest.fixture(scope="module")
def server_process(tmp_path_factory, data_template):
    """One server for this module's tests: they only look at pages (no form is sent, nothing
    is created or changed), so sharing it saves a start and a stop per test."""
    server = ServerProcess(tmp_path_factory.mktemp("narrow"), data_template)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _login(browser, base: str, user: str, password: str, viewport: dict, scheme="light"):
    context = browser.new_context(viewport=viewport, color_scheme=scheme)
    page = context.new_page()
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")
    return page


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"narrow-{name}.png"), full_page=False)


def _page_overflow(page) -> list[int]:
    return page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")


def _first_group(page, base: str) -> str:
    """A demo consumer group's page (the demo consumers join within seconds of start-up)."""
    page.goto(base + "/groups/")
    link = page.locator("#group-table td.grp-id a").first
    link.wait_for(timeout=WAIT_MS)
    return link.get_attribute("href")


def test_no_page_is_wider_than_a_phone(operator_login, browser):
    base, user, password = operator_login
    page = _login(browser, base, user, password, PHONE)
    group = _first_group(page, base)
    wider = {}
    for path in [*PAGES, group, group + "reset/"]:
        response = page.goto(base + path)
        assert response is not None and response.status == 200, path
        page.wait_for_load_state("networkidle")
        scroll_width, inner_width = _page_overflow(page)
        if scroll_width > inner_width:
            wider[path] = scroll_width
    assert inner_width == 375
    assert wider == {}, f"pages wider than the 375 px window: {wider}"


def test_the_top_bar_is_a_menu_on_a_phone(operator_login, browser):
    base, user, password = operator_login
    for scheme in ("light", "dark"):
        page = _login(browser, base, user, password, PHONE, scheme)
        page.goto(base + "/topics/")
        toggle = page.locator("[data-nav-toggle]")
        groups_link = page.locator("#nav-menu a", has_text="Consumer groups")
        assert toggle.is_visible() and toggle.get_attribute("aria-expanded") == "false"
        assert not groups_link.is_visible()  # folded away
        bar = page.locator("header.topbar").bounding_box()
        assert bar["height"] < 80, bar  # one row: brand, theme, menu button
        _shot(page, f"phone-topics-{scheme}")

        toggle.click()
        assert toggle.get_attribute("aria-expanded") == "true"
        assert groups_link.is_visible()
        for name in ("Overview", "Topics", "Panels", "Audit log", "Log out"):
            assert page.locator("#nav-menu", has_text=name).is_visible(), name
        assert _page_overflow(page)[0] <= PHONE["width"]
        _shot(page, f"phone-menu-open-{scheme}")
        page.keyboard.press("Escape")
        assert not groups_link.is_visible()
        assert toggle.get_attribute("aria-expanded") == "false"

        toggle.click()
        groups_link.click()
        page.wait_for_url(base + "/groups/")
        assert not page.locator("#nav-menu a", has_text="Topics").is_visible()  # closed again
        page.context.close()

    # wide windows show every page in the bar, no menu button
    page = _login(browser, base, user, password, DESKTOP)
    assert not page.locator("[data-nav-toggle]").is_visible()
    assert page.locator("#nav-menu a", has_text="Consumer groups").is_visible()
    assert _one_row(_nav_boxes(page))
    _shot(page, "desktop-overview-light")
    page.context.close()


def _nav_boxes(page) -> list[dict]:
    return [li.bounding_box() for li in page.locator("#nav-menu .nav-pages > li").all()]


def _one_row(boxes: list[dict]) -> bool:
    """The boxes share a horizontal band: the bar did not wrap onto a second row."""
    return max(b["y"] for b in boxes) < min(b["y"] + b["height"] for b in boxes)


def _nav_hrefs(page) -> list[str]:
    """Every page the top bar links to, those in its dropdowns included."""
    return [a.get_attribute("href") for a in page.locator("#nav-menu .nav-pages a").all()]


STREAM_PAGES = ["/jobs/", "/views/", "/searches/", "/capture/", "/dual-writes/"]


def test_every_page_of_the_nav_fits_a_desktop_window(operator_login, browser):
    base, user, password = operator_login
    page = _login(browser, base, user, password, DESKTOP)
    hrefs = _nav_hrefs(page)
    for path in ["/", "/topics/", "/groups/", "/transactions/", *STREAM_PAGES, "/panels/"]:
        assert path in hrefs, (path, hrefs)  # every page reachable from the top bar
    wider = {}
    for href in hrefs:
        response = page.goto(base + href)
        assert response is not None and response.status == 200, href
        page.wait_for_load_state("networkidle")
        scroll_width, inner_width = _page_overflow(page)
        if scroll_width > inner_width:
            wider[href] = scroll_width
        assert _one_row(_nav_boxes(page)), href
        current = page.locator("#nav-menu a[aria-current=page]")
        assert current.count() == 1 and current.get_attribute("href") == href, href
    assert inner_width == DESKTOP["width"]
    assert wider == {}, f"pages wider than the 1280 px window: {wider}"


def _overlap(a: dict, b: dict) -> bool:
    """Two boxes share some area."""
    across = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
    down = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
    return across > 0 and down > 0


def test_the_capture_forms_checkbox_text_and_its_note_do_not_overlap(operator_login, browser):
    base, user, password = operator_login
    page = _login(browser, base, user, password, DESKTOP)
    page.goto(base + "/capture/start/")
    label = page.locator("label", has=page.locator("input[name=snapshot]"))
    text = label.get_by_text("Snapshot the tables' current rows too").bounding_box()
    note = label.locator("small").bounding_box()
    box = page.locator("input[name=snapshot]").bounding_box()
    assert not _overlap(box, note), (box, note)  # the note once covered the checkbox itself
    assert not _overlap(text, note), (text, note)
    page.context.close()


def test_the_streams_menu_works_from_the_keyboard(operator_login, browser):
    base, user, password = operator_login
    page = _login(browser, base, user, password, DESKTOP)
    page.goto(base + "/topics/")
    summary = page.locator("#nav-menu .nav-streams summary")
    dual_writes = page.locator("#nav-menu .nav-streams a", has_text="Dual writes")
    assert not dual_writes.is_visible()  # folded away
    assert page.locator("nav[aria-label=Streams]").count() == 0  # no sub-navigation here
    summary.focus()
    page.keyboard.press("Enter")
    assert dual_writes.is_visible()
    page.keyboard.press("Escape")  # closes, focus back on the item
    assert not dual_writes.is_visible()
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Streams"
    page.keyboard.press("Enter")
    for _ in range(len(STREAM_PAGES) + 1):  # Tab through the dropdown to its last link
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.textContent.trim()") == "Dual writes":
            break
    page.keyboard.press("Enter")
    page.wait_for_url(base + "/dual-writes/")
    # the page is marked in the bar (the Streams item) and in the sub-navigation of its siblings
    assert "current" in (summary.get_attribute("class") or "")
    subnav = page.locator("nav[aria-label=Streams]")
    assert subnav.locator("a[aria-current=page]").inner_text() == "Dual writes"
    assert [a.get_attribute("href") for a in subnav.locator("a").all()] == STREAM_PAGES
    subnav.locator("a", has_text="Views").click()
    page.wait_for_url(base + "/views/")
    assert subnav.locator("a[aria-current=page]").inner_text() == "Views"
    _shot(page, "desktop-streams-subnav")
    page.context.close()

    page = _login(browser, base, user, password, PHONE)  # the phone menu: Streams opens in place
    page.locator("[data-nav-toggle]").click()
    page.locator("#nav-menu .nav-streams summary").click()
    jobs = page.locator("#nav-menu .nav-streams a", has_text="Jobs")
    assert jobs.is_visible()
    assert _page_overflow(page)[0] <= PHONE["width"]
    _shot(page, "phone-streams-open")
    jobs.click()
    page.wait_for_url(base + "/jobs/")
    page.context.close()


def test_wide_tables_scroll_inside_their_wrapper(operator_login, browser):
    base, user, password = operator_login
    page = _login(browser, base, user, password, PHONE)
    page.goto(base + "/topics/orders/")
    table = page.locator("table.partitions-table")
    wrapper = table.locator("xpath=..")
    sizes = wrapper.evaluate("w => [w.scrollWidth, w.clientWidth, getComputedStyle(w).overflowX]")
    assert sizes[0] > sizes[1] and sizes[2] == "auto", sizes  # wider than the phone: scrolls
    wrapper.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
    assert wrapper.evaluate("w => w.scrollLeft") > 0
    last = table.locator("thead th").last.bounding_box()
    assert last["x"] + last["width"] <= PHONE["width"]  # the last column scrolled into view
    assert _page_overflow(page)[0] <= PHONE["width"]  # the page itself did not move
    table.scroll_into_view_if_needed()
    _shot(page, "phone-partitions-scrolled")


def test_the_favicon_is_served(operator_login, browser):
    base, user, password = operator_login
    page = _login(browser, base, user, password, DESKTOP)
    href = page.locator("link[rel=icon]").get_attribute("href")
    response = page.request.get(base + href)
    assert response.status == 200 and response.headers["content-type"] == "image/svg+xml"
    assert b"<svg" in response.body()
    legacy = page.request.get(base + "/favicon.ico")  # asked for by pages without the link
    assert legacy.status == 200 and legacy.headers["content-type"] == "image/svg+xml"
    login = browser.new_page()  # before logging in too
    assert login.request.get(base + "/favicon.ico").status == 200
    login.close()
    page.context.close()


# The ASCII column of the last hex dump's first line (its two groups of 8 bytes, each in a span: the
# page's markup, templatetags hex_rows): its box, the dump's (<pre>) box and how wide the dump is
# inside (scrollWidth) against what it shows (clientWidth).
ASCII_BOX = """(selector) => {
  const pre = [...document.querySelectorAll(selector)].pop();  // the last: a record's value
  const columns = pre.querySelector(".hx").children;
  const boxes = [columns[3], columns[4]].map(c => c.getBoundingClientRect())
    .filter(r => r.width > 0);
  const p = pre.getBoundingClientRect();
  return {ascii: columns[3].textContent + columns[4].textContent,
          left: Math.min(...boxes.map(r => r.left)), right: Math.max(...boxes.map(r => r.right)),
          preLeft: p.left, preRight: p.right,
          scrollWidth: pre.scrollWidth, clientWidth: pre.clientWidth};
}"""
TABLE_DUMP = "table.records pre.kind-hex"
RECORD_DUMP = "pre.value.full.kind-hex"


def _assert_whole(box: dict) -> None:
    assert box["ascii"].startswith("{") and len(box["ascii"]) == 16, box  # demo JSON
    # the dump hides nothing behind its own scrollbar, and its ASCII lies inside it
    assert box["scrollWidth"] <= box["clientWidth"], box
    assert box["preLeft"] <= box["left"] and box["right"] <= box["preRight"], box


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_hex_views_ascii_column_is_whole(operator_login, browser, viewport):
    base, user, password = operator_login
    for scheme in ("light", "dark"):
        page = _login(browser, base, user, password, viewport, scheme)
        page.goto(base + "/topics/orders/messages/?view=hex")
        page.locator(TABLE_DUMP).first.wait_for(timeout=WAIT_MS)
        box = page.evaluate(ASCII_BOX, TABLE_DUMP)
        _assert_whole(box)
        if viewport is PHONE:  # the table scrolls sideways until the ASCII is on screen
            page.locator("table.records").locator("xpath=..").evaluate(
                "(w, right) => { w.scrollLeft += right - w.getBoundingClientRect().right + 16; }",
                box["right"],
            )
            box = page.evaluate(ASCII_BOX, TABLE_DUMP)
        assert 0 <= box["left"] and box["right"] <= viewport["width"], box  # on screen
        page.locator(TABLE_DUMP).first.scroll_into_view_if_needed()
        _shot(page, f"hex-table-{viewport['width']}-{scheme}")

        # one record's page: the whole dump on screen, no scrolling sideways at all
        href = page.locator("table.records td.actions a", has_text="Open").first
        page.goto(base + href.get_attribute("href") + "?view=hex")
        box = page.evaluate(ASCII_BOX, RECORD_DUMP)
        _assert_whole(box)
        assert 0 <= box["left"] and box["right"] <= viewport["width"], box
        assert _page_overflow(page)[0] <= viewport["width"]
        page.locator(RECORD_DUMP).last.scroll_into_view_if_needed()
        _shot(page, f"hex-record-{viewport['width']}-{scheme}")
        page.context.close()
