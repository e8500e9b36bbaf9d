"""The Content-Security-Policy header on console pages, and templates that need nothing it
forbids: no inline script or handler, no inline style, no htmx feature that evaluates code.
(tests/browser/test_csp_browser.py runs the pages in Chromium under the policy.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"

FORBIDDEN = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "inline event handler": re.compile(r"\son[a-z]+\s*=", re.I),
    "inline style element": re.compile(r"<style\b", re.I),
    "style attribute": re.compile(r"\sstyle\s*=", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
    "hx-on (eval)": re.compile(r"\bhx-on\b|\bhx-on:", re.I),
    "hx-vals/hx-vars with js: (eval)": re.compile(
        r"hx-va(?:ls|rs)\s*=\s*['\"]\s*(?:js|javascript):"
    ),
}


def _templates():
    return sorted(TEMPLATES.rglob("*.html"))


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_templates_need_nothing_the_policy_forbids(what):
    pattern = FORBIDDEN[what]
    found = [
        f"{path.relative_to(TEMPLATES)}:{text[: m.start()].count(chr(10)) + 1}"
        for path in _templates()
        for text in [path.read_text()]
        for m in pattern.finditer(text)
    ]
    assert found == [], f"{what} in {found}"


def test_no_htmx_trigger_has_a_filter():
    """`every 10s [document.visibilityState === 'visible']` is evaluated code; a CSS selector
    in `from:input[name=q]` is not."""
    found = []
    for path in _templates():
        for m in re.finditer(r'hx-trigger\s*=\s*"([^"]*)"', path.read_text()):
            spec = re.sub(r"\b(?:from|target):\S+", "", m.group(1))
            if "[" in spec:
                found.append(f"{path.relative_to(TEMPLATES)}: {m.group(1)}")
    assert found == []


def test_htmx_is_configured_to_run_without_eval_or_inline_styles():
    base = (TEMPLATES / "base.html").read_text()
    config = re.search(r'<meta name="htmx-config" content=\'([^\']+)\'>', base).group(1)

    assert '"allowEval": false' in config
    assert '"includeIndicatorStyles": false' in config
    assert '"style"' not in config  # attributesToSettle without style


def _directives(policy: str) -> dict[str, list[str]]:
    parts = (p.strip().split() for p in policy.split(";") if p.strip())
    return {p[0]: p[1:] for p in parts}


@pytest.mark.parametrize(
    "url", ["/", "/topics/", "/groups/", "/panels/", "/audit/", "/accounts/", "/no/such/page/"]
)
def test_console_pages_carry_a_strict_policy(viewer_client, broker, url):
    response = viewer_client.get(url)

    policy = _directives(response["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert not any("unsafe" in v for values in policy.values() for v in values)


def test_the_login_page_carries_it_too(db):
    from django.test import Client

    response = Client().get(reverse("login"))

    assert "script-src 'self'" in response["Content-Security-Policy"]
