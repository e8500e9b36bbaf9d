"""The message pages in Debian's Chromium against a real server: produce (one message with
headers, then several, one per line), browse newest first across partitions, filter, "show all",
seek to an offset, re-send a shown message to another topic. Untrusted markup in values and
headers must stay text. Screenshots go to tests/browser/screenshots/messages-*.png."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import REPO_DIR, SCREENSHOTS  # noqa: F401

pytestmark = pytest.mark.browser


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"messages-{name}.png"), full_page=True)


def _order(n_items: int) -> str:
    return json.dumps(
        {
            "order_id": "o-9001",
            "customer": "cust-42",
            "status": "placed",
            "note": "<script>window.__xss = 1</script>",
            "items": [
                {
                    "sku": f"SKU-{1000 + i}",
                    "qty": 1 + i % 3,
                    "title": "Espresso beans 1kg",
                    "price": 24.9,
                }
                for i in range(n_items)
            ],
        }
    )


def test_produce_browse_filter_and_resend(operator_login, browser):
    base, user, password = operator_login
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")

    # produce one big JSON message with headers holding markup
    page.goto(base + "/topics/orders/produce/")
    _shot(page, "produce-form")
    page.fill("input[name=key]", "cust-42")
    page.fill("textarea[name=value]", _order(40))
    page.fill(
        "textarea[name=headers]",
        'trace-id: 4bf92f35\nsource: <img src=x onerror="window.__xss = 2">',
    )
    page.click("form.produce-form button[type=submit]")
    assert "Wrote 1 message to" in page.locator(".produce-results h2").inner_text()

    # several at once: one per line, key|value
    page.fill("input[name=key]", "")
    page.fill("textarea[name=headers]", "")
    page.fill(
        "textarea[name=value]",
        "\n".join(
            f'cust-{n}|{{"order_id": "o-{n}", "customer": "cust-{n}", "total": {n}.5}}'
            for n in (7, 8, 42)
        ),
    )
    page.check("input[name=per_line]")
    page.fill("input[name=key_separator]", "|")
    page.click("form.produce-form button[type=submit]")
    assert "Wrote 3 messages to" in page.locator(".produce-results h2").inner_text()
    _shot(page, "produce-result")

    # browse: newest first across the three partitions, ordered by timestamp
    page.goto(base + "/topics/orders/messages/")
    page.wait_for_selector("#record-rows tr[data-offset]")
    stamps = page.locator("#record-rows tr[data-timestamp]").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.timestamp))"
    )
    assert stamps == sorted(stamps, reverse=True)
    partitions = page.locator("#record-rows tr[data-partition]").evaluate_all(
        "rows => new Set(rows.map(r => r.dataset.partition)).size"
    )
    assert partitions > 1

    # filter: key equals cust-42
    page.select_option(".filter-row select[name=field]", "key")
    page.select_option(".filter-row select[name=op]", "equals")
    page.fill(".filter-row input[name=text]", "cust-42")
    page.click("form.browse-form button[type=submit]")
    page.wait_for_selector("#browse-progress")
    keys = page.locator("#record-rows td.key code").all_inner_texts()
    assert keys and set(keys) == {"cust-42"}
    assert page.locator("#record-rows tr.empty").is_hidden()
    big = page.locator("#record-rows tr", has=page.locator("a.show-all")).first
    partition, offset = big.get_attribute("data-partition"), big.get_attribute("data-offset")
    big_row = page.locator(f'#record-rows tr[data-partition="{partition}"][data-offset="{offset}"]')
    assert "<img src=x" in big_row.locator("td.headers").inner_text()
    assert page.evaluate("window.__xss") is None
    _shot(page, "browse-filter")

    # show all: the big value loads in place (htmx)
    assert "SKU-1039" not in big_row.inner_text()
    big_row.locator("a.show-all").click()
    big_row.locator("pre.value.full").wait_for()
    assert "SKU-1039" in big_row.inner_text()
    assert page.evaluate("window.__xss") is None

    # seek: partition of that row, from offset 0; the offset box appears with the choice
    page.goto(base + "/topics/orders/messages/")
    page.select_option("select[name=partition]", partition)
    assert page.locator("input[name=offset]").is_hidden()
    page.select_option("select[name=seek]", "offset")
    page.locator("input[name=offset]").fill("0")
    page.click("form.browse-form button[type=submit]")
    page.wait_for_selector("#record-rows tr[data-offset]")
    rows = page.locator("#record-rows tr[data-offset]")
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.partition)")) == {partition}
    assert rows.first.get_attribute("data-offset") == "0"
    assert page.locator(".view-toggle a[aria-current]").inner_text() == "auto"
    page.click(".view-toggle >> text=hex")
    page.wait_for_selector("pre.value.kind-hex")
    assert page.locator("#record-rows tr[data-offset]").first.get_attribute("data-offset") == "0"

    # re-send the first shown record to another topic
    page.locator("#record-rows tr[data-offset]").first.locator("text=Re-send").click()
    page.wait_for_selector("form.produce-form")
    assert "Copied from orders partition" in page.locator(".note").first.inner_text()
    page.select_option("select[name=topic]", "page-views")
    page.click("form.produce-form button[type=submit]")
    assert "to page-views" in page.locator(".produce-results h2").inner_text()

    # the filtered page once more, in the dark theme
    page.goto(base + "/topics/orders/messages/?seek=newest&field=key&op=equals&text=cust-42")
    page.wait_for_selector("#record-rows tr[data-offset]")
    if page.evaluate("document.documentElement.dataset.theme") != "dark":
        page.click("[data-theme-toggle]")
    page.wait_for_timeout(500)  # Pico's colour transitions
    _shot(page, "browse-dark")
