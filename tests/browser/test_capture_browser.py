"""The Capture page in Debian's Chromium against a real server with its Kafka listener on and a
private PostgreSQL: a refused start says why and keeps the form; a source starts, its topic and
numbers show with units; a snapshot runs to "done … as of offset N"; stop asks first. No console
error. Screenshots: /tmp/capture-*.png (not committed)."""

from __future__ import annotations

import psycopg2
import pytest

from tests.browser.conftest import ServerProcess, _free_port, logged_in_page
from tests.postgres_server import PostgresServer, require_postgres

pytestmark = pytest.mark.browser


@pytest.fixture
def postgres():
    with PostgresServer(require_postgres()) as server:
        conn = psycopg2.connect(server.dsn())
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
        conn.close()
        conn = psycopg2.connect(server.dsn("shop"))
        with conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
            cur.execute("INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 200) g")
            cur.execute("CREATE TABLE notes (body text)")
        conn.close()
        yield server


@pytest.fixture
def server_process(postgres, tmp_path, data_template):
    server = ServerProcess(tmp_path, data_template)
    server.env["TIDELOG_KAFKA_LISTENER"] = "1"
    server.env["TIDELOG_KAFKA_PORT"] = str(_free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_capture_page_starts_snapshots_and_stops_a_source(postgres, operator_login, browser):
    base, page, problems = logged_in_page(browser, operator_login)
    page.goto(base + "/capture/")
    assert "No capture sources yet" in page.inner_text("#capture-empty")
    page.click("#capture-start-link")

    page.fill("input[name=name]", "shop")
    page.fill("input[name=dsn]", postgres.dsn("shop"))
    page.fill("input[name=tables]", "notes")
    page.click("#capture-start-button")
    error = page.locator("#capture-start-error")
    assert "primary key" in error.inner_text()
    assert page.input_value("input[name=tables]") == "notes"  # what was typed is kept
    page.screenshot(path="/tmp/capture-refused.png", full_page=True)

    page.fill("input[name=name]", "shop2")
    page.fill("input[name=tables]", "items")
    page.click("#capture-start-button")
    page.wait_for_url(base + "/capture/")
    card = page.locator('[data-source="shop2"]')
    assert card.get_attribute("data-state") == "running"
    assert card.locator("[data-source-topic]").inner_text() == "shop2.public.items"
    assert " B" in card.locator('[data-stat="lag_bytes"]').inner_text()  # a unit
    assert card.locator('[data-stat="lag_seconds"]').inner_text().endswith("s")

    card.locator("[data-source-snapshot]").click()
    page.click("#capture-snapshot-button")
    page.wait_for_url(base + "/capture/")
    done = page.locator('[data-source="shop2"] [data-snapshot="public.items"][data-done="1"]')
    done.wait_for(timeout=60_000)
    page.locator('[data-source="shop2"] [data-as-of-offset]').wait_for(timeout=30_000)
    row = done.inner_text()
    assert "200" in row and "done" in row and "offset" in row
    page.screenshot(path="/tmp/capture-running.png", full_page=True)

    page.locator('[data-source="shop2"] [data-source-stop]').click()
    page.click("#stop-button")  # not confirmed yet: the page says so
    assert "tick to confirm" in page.inner_text("main")
    page.check("input[name=confirm]")
    page.click("#stop-button")
    page.wait_for_url(base + "/capture/")
    stopped = page.locator('[data-source="shop2"]')
    assert stopped.get_attribute("data-state") == "stopped"
    page.screenshot(path="/tmp/capture-stopped.png", full_page=True)
    assert not problems, problems
