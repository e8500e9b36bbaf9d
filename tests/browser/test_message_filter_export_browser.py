"""The messages page's expression filter and export in Debian's Chromium against a real server:
a syntax error's caret sits under the character it concerns, a valid expression selects the
records, and "Export all matches" downloads a JSON Lines file holding them and the query.
Screenshots go to /tmp/msgs-*.png (not committed)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.browser


def _login(page, base, user, password):
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")


def test_filter_error_caret_and_export_download(operator_login, browser, tmp_path):
    base, user, password = operator_login
    page = browser.new_page(viewport={"width": 1440, "height": 1000}, accept_downloads=True)
    _login(page, base, user, password)

    # three JSON messages with a key of ours (the demo writes to "orders" too)
    page.goto(base + "/topics/orders/produce/")
    page.fill(
        "textarea[name=value]",
        "\n".join(
            f'bt-{n}|{{"order_id": "bt-{n}", "customer": "{name}", "total": {n}}}'
            for n, name in ((1, "Ann Lee"), (2, "BOB"), (3, "ann-marie"))
        ),
    )
    page.check("input[name=per_line]")
    page.fill("input[name=key_separator]", "|")
    page.click("form.produce-form button[type=submit]")
    assert "Wrote 3 messages to" in page.locator(".produce-results h2").inner_text()

    # a syntax error: the caret is drawn under the second ">" of ">>"
    page.goto(base + "/topics/orders/messages/")
    expression = 'key.startsWith("bt-") && value.total >> 1'
    page.fill("textarea[name=q]", expression)
    page.click("form.browse-form button[type=submit]")
    error = page.locator("[data-expression-error]")
    error.wait_for()
    column = int(error.get_attribute("data-column"))
    assert expression[column - 1] == ">" and expression[column - 2] == ">"
    assert f"column {column}" in error.inner_text()
    # the caret's left edge lines up with that character's in the shown source line
    caret_x, char_x = page.evaluate(
        """col => {
            const code = document.querySelector('[data-expression-error] code');
            const text = code.firstChild;  // the source line, then "\\n", then the caret
            const range = document.createRange();
            range.setStart(text, col - 1);
            range.setEnd(text, col);
            const caretRange = document.createRange();
            const caret = code.querySelector('.caret').firstChild;
            caretRange.setStart(caret, caret.length - 1);
            caretRange.setEnd(caret, caret.length);
            return [caretRange.getBoundingClientRect().left, range.getBoundingClientRect().left];
        }""",
        column,
    )
    assert abs(caret_x - char_x) < 1.5, (caret_x, char_x)
    assert page.locator("#browse-results").count() == 0  # no result table that looks empty
    page.screenshot(path="/tmp/msgs-filter-caret.png", full_page=True)

    # a valid, case-insensitive expression selects the two "ann"s
    page.fill(
        "textarea[name=q]",
        'key.startsWith("bt-") && value.customer.lowerAscii().contains("ann")',
    )
    page.click("form.browse-form button[type=submit]")
    page.wait_for_selector("#record-rows tr[data-offset]")
    assert sorted(page.locator("#record-rows td.key code").all_inner_texts()) == ["bt-1", "bt-3"]
    progress = page.locator("#browse-progress").inner_text()
    assert "Scanned" in progress and "records in range" in progress
    page.screenshot(path="/tmp/msgs-filter-result.png", full_page=True)

    # export: the download holds the query, the range and exactly those records
    with page.expect_download() as info:
        page.click("[data-export=jsonl]")
    download = info.value
    assert download.suggested_filename.startswith("orders-")
    assert download.suggested_filename.endswith(".jsonl")
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    lines = path.read_bytes().splitlines()
    meta = json.loads(lines[0])["tidelog_export"]
    assert "lowerAscii" in meta["filter"]["expression"]
    assert {r["partition"] for r in meta["range"]} == {0, 1, 2}
    records = [json.loads(line) for line in lines[1:-1]]
    assert sorted(r["key"] for r in records) == ["bt-1", "bt-3"]
    assert json.loads(lines[-1])["tidelog_export_end"]["complete"] is True
    page.close()
