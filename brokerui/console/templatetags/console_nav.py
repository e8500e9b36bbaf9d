"""`{% streams_nav nav as streams %}`: the stream-processing pages, grouped under one *Streams*
item of the top bar (a dropdown) and shown as a sub-navigation on those pages (templates/base.html).

One list for both, so a page added here is reachable from every page. A page whose route is not
installed (a branch without it) is left out rather than breaking every page's template."""

from __future__ import annotations

from dataclasses import dataclass

from django import template
from django.urls import NoReverseMatch, reverse

register = template.Library()

# (the view's `nav` value, label, route name), in the order the menu shows them
STREAM_PAGES = (
    ("jobs", "Jobs", "console:jobs"),
    ("views", "Views", "console:views"),
    ("searches", "Searches", "console:searches"),
    ("capture", "Capture", "console:capture"),
    ("dualwrite", "Dual writes", "console:dualwrite"),
)


@dataclass(frozen=True)
class NavLink:
    key: str
    label: str
    url: str
    current: bool


@dataclass(frozen=True)
class StreamsNav:
    links: tuple[NavLink, ...]
    current: bool  # the page being shown is one of them


@register.simple_tag
def streams_nav(nav: str = "") -> StreamsNav:
    links = []
    for key, label, route in STREAM_PAGES:
        try:
            url = reverse(route)
        except NoReverseMatch:
            continue
        links.append(NavLink(key, label, url, key == nav))
    return StreamsNav(tuple(links), any(link.current for link in links))
