"""The Streams item of the top bar: every stream-processing page, the current one marked, and a
page whose route is not installed left out instead of breaking every page."""

from __future__ import annotations

from brokerui.console.templatetags import console_nav


def test_the_streams_menu_lists_its_pages_and_marks_the_current_one():
    nav = console_nav.streams_nav("dualwrite")
    assert [link.url for link in nav.links] == [
        "/jobs/",
        "/views/",
        "/searches/",
        "/capture/",
        "/dual-writes/",
    ]
    assert nav.current and [link.label for link in nav.links if link.current] == ["Dual writes"]
    assert not console_nav.streams_nav("topics").current


def test_a_page_without_a_route_is_left_out(monkeypatch):
    pages = (*console_nav.STREAM_PAGES, ("later", "Later", "console:not-installed"))
    monkeypatch.setattr(console_nav, "STREAM_PAGES", pages)
    assert "Later" not in [link.label for link in console_nav.streams_nav("later").links]


def test_every_page_shows_the_streams_menu(operator_client, broker):
    page = operator_client.get("/topics/").content.decode()
    assert 'href="/dual-writes/"' in page and 'href="/capture/"' in page
    assert 'aria-label="Streams"' not in page  # the sub-navigation is on the Streams pages only
    page = operator_client.get("/capture/").content.decode()
    assert 'aria-label="Streams"' in page and page.count('aria-current="page"') == 2
