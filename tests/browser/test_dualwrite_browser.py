"""The dual-write race page in Debian's Chromium against a real server: the link from the Jobs
page, a bad size refused with a clear message, a run's progress refreshed by htmx while it
runs, then the two modes' divergent-key counts with units, without a CSP violation; and the
same through CDC from a private PostgreSQL. Screenshots: /tmp/esource-*.png (not committed)."""

from __future__ import annotations

import re

import psycopg2
import pytest

from tests.browser.conftest import ServerProcess, _free_port, logged_in_page
from tests.postgres_server import PostgresServer, require_postgres

pytestmark = pytest.mark.browser


def _shot(page, name: str) -> None:
    page.screenshot(path=f"/tmp/esource-{name}.png", full_page=True)


def _login(browser, operator_login):
    return logged_in_page(browser, operator_login)


def test_dual_write_race_page(operator_login, browser):
    base, page, problems = _login(browser, operator_login)

    page.click("#nav-menu .nav-streams summary")  # the Streams dropdown of the top bar
    page.click("#nav-menu .nav-streams a:has-text('Jobs')")
    page.click("#jobs-dualwrite-link a")
    page.wait_for_url(base + "/dual-writes/")
    _shot(page, "form")

    page.fill("input[name=keys]", "0")
    page.evaluate("document.getElementById('dualwrite-form').noValidate = true")
    page.click("#dualwrite-start")
    assert "greater than or equal to 1" in page.inner_text("#dualwrite-form")
    _shot(page, "bad-input")
    assert all("status of 400" in p for p in problems), problems  # the refused form's answer
    problems.clear()

    page.fill("input[name=keys]", "50")
    page.fill("input[name=updates]", "1500")
    page.click("#dualwrite-start")
    page.wait_for_url(re.compile(r".*/dual-writes/[0-9a-f]{12}/$"))
    run = page.locator("#dualwrite-run")
    # while it runs, htmx swaps in the progress: the count of updates made goes up
    page.locator("#dualwrite-progress").wait_for()
    first = page.inner_text("#dualwrite-progress")
    assert "updates made" in first and "%" in first
    _shot(page, "running")
    page.wait_for_function(
        "() => document.querySelector('#dualwrite-run').dataset.state !== 'running'",
        timeout=240_000,
    )
    assert run.get_attribute("data-state") == "done"
    direct = page.locator("#dualwrite-direct")
    logged = page.locator("#dualwrite-log")
    assert int(logged.locator("[data-divergent]").get_attribute("data-divergent")) == 0
    assert "converged" in logged.inner_text()
    assert "writes through the log" in page.inner_text("#dualwrite-log-mode")
    assert "not CDC: no PostgreSQL configured" in page.inner_text("#dualwrite-log-mode")
    for column in (direct, logged):
        text = column.inner_text()
        assert " writes/s" in text and " ms" in text and " writes" in text and "%" in text
    assert "took" in page.inner_text(".freshness")
    _shot(page, "done")
    assert not problems, problems


@pytest.fixture
def postgres():
    with PostgresServer(require_postgres()) as server:
        conn = psycopg2.connect(server.dsn())
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
        conn.close()
        yield server


@pytest.fixture
def server_process(request, tmp_path, data_template):
    """The conftest's server; for the cdc test with its Kafka listener on and a PostgreSQL."""
    server = ServerProcess(tmp_path, data_template)
    if "postgres" in request.fixturenames:
        pg = request.getfixturevalue("postgres")
        server.env["TIDELOG_KAFKA_LISTENER"] = "1"
        server.env["TIDELOG_KAFKA_PORT"] = str(_free_port())
        server.env["TIDELOG_DUALWRITE_POSTGRES"] = pg.dsn("shop")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_dual_write_race_page_through_cdc_from_postgresql(postgres, operator_login, browser):
    base, page, problems = _login(browser, operator_login)
    page.goto(base + "/dual-writes/")
    assert "CDC from PostgreSQL" in page.inner_text("#dualwrite-through")
    page.fill("input[name=keys]", "40")
    page.fill("input[name=updates]", "800")
    page.click("#dualwrite-start")
    page.wait_for_url(re.compile(r".*/dual-writes/[0-9a-f]{12}/$"))
    page.wait_for_function(
        "() => document.querySelector('#dualwrite-run').dataset.state !== 'running'",
        timeout=240_000,
    )
    assert page.locator("#dualwrite-run").get_attribute("data-state") == "done"
    logged = page.locator("#dualwrite-log")
    assert logged.get_attribute("data-mode") == "cdc"
    assert "CDC from PostgreSQL" in logged.inner_text()
    assert "the database is PostgreSQL" in page.inner_text("#dualwrite-log-mode")
    assert int(logged.locator("[data-divergent]").get_attribute("data-divergent")) == 0
    assert " writes/s" in logged.inner_text()
    _shot(page, "cdc-done")
    assert not problems, problems
