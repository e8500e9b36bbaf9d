"""The Schemas pages in Debian's Chromium against a real server (with the demo, whose payments
register ``payments-value``): an operator reaches them from the top bar, registers two Avro
versions of a subject through the form, sees the check's hint appear while typing (new
subject, compatible, incompatible, a parse error), compares the versions side by side, and
soft-deletes one behind the typed confirmation; audited, without a CSP violation.
Screenshots: tests/browser/screenshots/schemas-*.png (light theme)."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import SCREENSHOTS, logged_in_page

pytestmark = pytest.mark.browser
SUBJECT = "shipments-value"
WAIT_MS = 10_000


def avro(*fields) -> str:
    record = {"type": "record", "name": "Shipment", "namespace": "shop", "fields": list(fields)}
    return json.dumps(record, indent=2)


V1 = avro({"name": "id", "type": "string"}, {"name": "order_id", "type": "string"})
V2 = avro(
    {"name": "id", "type": "string"},
    {"name": "order_id", "type": "string"},
    {"name": "carrier", "type": "string", "default": "post"},
)
INCOMPATIBLE = avro(
    {"name": "id", "type": "string"},
    {"name": "order_id", "type": "string"},
    {"name": "weight_g", "type": "int"},  # no default: cannot read version 1's records
)


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"schemas-{name}.png"), full_page=True)


def _type_schema(page, text: str) -> None:
    """Put `text` in the schema box as a person would end typing it: all but its last
    character pasted, the last one typed (a keyup, which the check listens to)."""
    box = page.locator("#register-form textarea[name=schema]")
    box.fill(text[:-1])
    box.press_sequentially(text[-1])


def _check(page, state: str) -> str:
    hint = page.locator(f'#schema-check[data-check-state="{state}"]')
    hint.wait_for(timeout=WAIT_MS)
    return hint.inner_text()


def test_register_two_versions_check_as_you_type_and_compare(operator_login, browser):
    base, page, problems = logged_in_page(browser, operator_login)

    page.click("#nav-menu a:has-text('Schemas')")
    page.wait_for_url(base + "/schemas/")
    assert page.locator("#nav-menu a[aria-current=page]").inner_text() == "Schemas"
    assert "SchemaRegistryClient" in page.locator("#registry-snippet").inner_text()
    _shot(page, "list-before")

    # a new subject: through the empty state's form, or the button once the demo registered
    if page.locator("#register-form").count() == 0:
        page.click("a[role=button]:has-text('Register a schema')")
        page.wait_for_url(base + "/new-schema/")
    page.fill("#register-form input[name=subject]", SUBJECT)
    _type_schema(page, V1.replace('"type": "string"\n    }\n  ]', '"type": "string"\n    }\n  '))
    assert "Line" in _check(page, "invalid")  # the unclosed list: where it is said
    _type_schema(page, V1)
    assert "New subject: it would be version 1" in _check(page, "ok")
    _shot(page, "register-new-subject")
    page.click("#register-button")
    page.wait_for_url(f"{base}/schemas/{SUBJECT}/?version=1")
    assert f"Registered {SUBJECT} version 1" in page.inner_text(".messages")

    # the second version, from the subject's page: the form starts from version 1
    page.click("#register-version")
    page.wait_for_url(f"{base}/schemas/{SUBJECT}/register/")
    assert "Already registered as version 1" in _check(page, "same")  # checked on load
    _type_schema(page, INCOMPATIBLE)
    hint = _check(page, "incompatible")
    assert "Not compatible with version 1 under BACKWARD" in hint and "weight_g" in hint
    _shot(page, "register-incompatible")
    _type_schema(page, V2)
    assert "Compatible with version 1 under BACKWARD; it would be version 2" in _check(page, "ok")
    _shot(page, "register-compatible")
    page.click("#register-button")
    page.wait_for_url(f"{base}/schemas/{SUBJECT}/?version=2")
    assert f"Registered {SUBJECT} version 2" in page.inner_text(".messages")

    # side by side: version 1 → 2 by default, the sides picked with the selects (htmx)
    diff = page.locator("#schema-diff")
    assert "From version 1" in diff.inner_text()
    added = diff.locator('tr[data-kind="added"]')
    assert added.count() >= 4 and '"carrier"' in " ".join(added.all_inner_texts())
    page.locator("#schema-diff").scroll_into_view_if_needed()
    _shot(page, "detail-diff")
    page.select_option("#diff-form select[name=left]", "2")
    page.select_option("#diff-form select[name=right]", "1")
    page.wait_for_function(
        "() => document.querySelector('#schema-diff').textContent.includes('From version 2')"
    )
    assert diff.locator('tr[data-kind="removed"]').count() >= 4
    assert "left=2" in page.url and "right=1" in page.url  # the choice is in the address
    page.locator("#schema-diff").scroll_into_view_if_needed()
    _shot(page, "detail-diff-reversed")

    # a soft delete behind the typed confirmation; the button waits for the exact text
    page.goto(f"{base}/schemas/{SUBJECT}/")
    page.click('a[data-delete="1"]')
    page.wait_for_url(f"{base}/schemas/{SUBJECT}/versions/1/delete/")
    button = page.locator("#delete-button")
    page.fill("#id_confirm", SUBJECT)
    assert button.is_disabled()
    page.fill("#id_confirm", f"{SUBJECT} version 1")
    assert button.is_enabled()
    _shot(page, "delete-confirm")
    button.click()
    page.wait_for_url(f"{base}/schemas/{SUBJECT}/?deleted=1")
    row = page.locator('tr[data-version="1"]')
    assert "soft-deleted" in row.inner_text()
    assert row.locator("a[data-delete-permanent]").count() == 1  # offered only now
    _shot(page, "detail-after-delete")

    page.goto(base + "/schemas/")
    assert page.locator(f'tr[data-subject="{SUBJECT}"]').count() == 1
    _shot(page, "list-after")
    page.goto(base + "/audit/")
    body = page.inner_text("body")
    assert "schema.register" in body and "schema.delete" in body
    assert not problems, problems
