"""The Transactions page in Debian's Chromium against a real server whose Kafka listener holds
an open transaction of confluent-kafka's transactional producer: the nav link, the table (units,
freshness), the LSO on the topic page, and an operator's abort through the confirmation page,
without a CSP violation. Screenshots: /tmp/txnui-*.png (not committed)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.browser.conftest import ServerProcess, _free_port

pytestmark = pytest.mark.browser
DEADLINE_S = 20


@pytest.fixture
def server_process(tmp_path, data_template):
    """The conftest's server, with its Kafka listener on (the transaction coordinator)."""
    server = ServerProcess(tmp_path, data_template)
    server.kafka_port = _free_port()
    server.env["TIDELOG_KAFKA_LISTENER"] = "1"
    server.env["TIDELOG_KAFKA_PORT"] = str(server.kafka_port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _shot(page, name: str) -> None:
    page.screenshot(path=f"/tmp/txnui-{name}.png", full_page=True)


def test_transactions_page_and_abort(server_process, operator_login, browser):
    base, user, password = operator_login
    bootstrap = f"127.0.0.1:{server_process.kafka_port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("settlements", 2)]).values():
        f.result(DEADLINE_S)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "checkout-7",
            "transaction.timeout.ms": 900_000,
        }
    )
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("settlements", b"settle-%d" % i, partition=i % 2)
    assert producer.flush(DEADLINE_S) == 0

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")

    page.click("nav a:has-text('Transactions')")
    page.wait_for_url(base + "/transactions/")
    row = page.locator('tr[data-txn="checkout-7"]')
    assert row.get_attribute("data-state") == "Ongoing"
    assert "settlements-0" in row.inner_text() and "settlements-1" in row.inner_text()
    assert "15 min" in row.locator(".txn-timeout").inner_text()
    assert "as of" in page.locator(".freshness").inner_text()
    page.wait_for_timeout(5500)  # the htmx refresh swaps the table in place
    assert page.locator('tr[data-txn="checkout-7"]').count() == 1
    _shot(page, "list")

    page.goto(base + "/topics/settlements/")
    lso = page.locator("td.stable-offset")
    assert lso.nth(0).get_attribute("data-lso") == "0"  # held at the transaction's first offset
    assert "open txn" in lso.nth(0).inner_text()
    _shot(page, "topic")

    page.goto(base + "/transactions/")
    page.click('tr[data-txn="checkout-7"] a:has-text("abort")')
    page.wait_for_url(base + "/transactions/checkout-7/abort/")
    _shot(page, "confirm")
    page.check("input[name=confirm]")
    page.click("#abort-button")
    page.wait_for_url(base + "/transactions/")
    assert "Aborted the transaction of checkout-7" in page.inner_text("body")
    assert page.locator("#txn-empty").count() == 1
    _shot(page, "aborted")

    page.goto(base + "/topics/settlements/")
    assert page.locator("td.stable-offset").nth(0).get_attribute("data-lso") == "4"  # 3 + marker
    page.goto(base + "/topics/settlements/messages/?partition=0&seek=oldest")
    assert page.locator("tr.control-marker").count() == 0  # hidden by default
    page.check("input[name=markers]")
    page.click(".browse-form button[type=submit]")
    marker = page.locator('tr.control-marker[data-offset="3"]')
    marker.wait_for()
    assert marker.get_attribute("data-marker") == "ABORT"
    assert page.locator("#record-rows tr[data-offset]").count() == 4  # 3 records, then ABORT
    _shot(page, "messages")
    page.select_option("select[name=read]", "committed")
    page.click(".browse-form button[type=submit]")
    page.wait_for_url("**read=committed**")
    assert page.locator("#record-rows tr[data-offset]:not(.control-marker)").count() == 0

    page.goto(base + "/audit/")
    assert "transaction.abort" in page.inner_text("body")
    assert not problems, problems
