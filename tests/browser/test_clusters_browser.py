"""Three clusters in one console, in Debian's Chromium against a real server started with a
TIDELOG_CONFIG file: the built-in broker (``local``), Tidelog's listener requiring SCRAM-SHA-512
over TLS (``secured``, a certificate made here, the password from the environment) and tansu
(``tansu``). Through the cluster switcher the operator opens each cluster and walks the same
pages there — overview, topics, a topic, its messages, consumer groups with a group's page,
transactions, the JSON API — every URL under the cluster's prefix, each showing that cluster's
own topic and group; the overview lists all three as reachable. No console error, no CSP
violation. Screenshots: tests/browser/screenshots/clusters-*.png."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.browser.conftest import SCREENSHOTS, ServerProcess, logged_in_page
from tests.kafka_servers import Tansu, tansu_binary
from tests.secured_cluster import SecuredListener
from tests.system_programs import under_ci

pytestmark = pytest.mark.browser
WAIT_MS = 15_000


def _seed(conf: dict, topic: str, group: str) -> None:
    """A topic with 3 records and a group that has read 2 of them (lag 1)."""
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer(conf)
    for i in range(3):
        producer.produce(topic, f'{{"n": {i}}}'.encode(), key=f"k{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    seen, deadline = [], time.monotonic() + 60
    while len(seen) < 2 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m)
    consumer.commit(message=seen[1], asynchronous=False)
    consumer.close()


@pytest.fixture
def server_process(tmp_path, data_template):
    try:
        tansu_binary()
    except RuntimeError as exc:
        if under_ci():  # make test installs it: a broken set-up never passes as a skip
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    secured = SecuredListener(tmp_path / "secured")
    tansu = Tansu(str(tmp_path))
    secured.start()
    tansu.start()
    try:
        _seed(secured.client_config, "secured-orders", "secured-readers")
        _seed({"bootstrap.servers": tansu.bootstrap}, "tansu-orders", "tansu-readers")
        config = tmp_path / "tidelog.toml"
        config.write_text(
            f'[clusters.secured]\nbootstrap = "{secured.url}"\n'
            f'client_properties = "{secured.client_properties}"\n'
            f'[clusters.tansu]\nbootstrap = "{tansu.url}"\n'
        )
        server = ServerProcess(tmp_path, data_template)
        server.env["TIDELOG_CONFIG"] = str(config)
        server.env["TIDELOG_DEMO"] = "0"
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        tansu.stop()
        secured.stop()


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"clusters-{name}.png"), full_page=True)


def _switch(page, name: str) -> None:
    page.click(".cluster-switcher summary")
    page.click(f'.cluster-switcher a[data-cluster-link="{name}"]')
    page.wait_for_selector(f'.cluster-switcher summary[data-cluster="{name}"]', timeout=WAIT_MS)


def test_the_same_pages_on_each_cluster_through_the_switcher(operator_login, browser):
    base, page, problems = logged_in_page(browser, operator_login)
    page.goto(base + "/")
    for name in ("secured", "tansu"):
        _switch(page, name)
        prefix = f"{base}/c/{name}"
        assert page.url == prefix + "/"
        topic, group = f"{name}-orders", f"{name}-readers"
        page.click("ul.nav-pages a:text-is('Topics')")
        page.wait_for_url(prefix + "/topics/", timeout=WAIT_MS)
        assert topic in page.inner_text("main")
        assert "local" not in [a.inner_text() for a in page.query_selector_all("main td a")]
        page.click(f'main a[href="/c/{name}/topics/{topic}/"]')
        page.wait_for_url(f"{prefix}/topics/{topic}/", timeout=WAIT_MS)
        assert group in page.inner_text("main")  # the group reading it
        page.goto(f"{prefix}/topics/{topic}/messages/?seek=oldest")
        page.wait_for_selector("main table", timeout=WAIT_MS)
        text = page.inner_text("main")
        assert "k0" in text, text[:2000]  # the oldest first (a first scan may stop at 200 ms)
        _shot(page, f"{name}-messages")
        page.click("ul.nav-pages a:text-is('Consumer groups')")
        page.wait_for_url(prefix + "/groups/", timeout=WAIT_MS)
        page.click(f'main a[href="/c/{name}/groups/{group}/"]')
        page.wait_for_url(f"{prefix}/groups/{group}/", timeout=WAIT_MS)
        assert topic in page.inner_text("main")
        page.click("ul.nav-pages a:text-is('Transactions')")
        page.wait_for_url(prefix + "/transactions/", timeout=WAIT_MS)
        api = page.request.get(f"{prefix}/api/v1/topics")
        assert api.status == 200 and topic in {t["name"] for t in api.json()["topics"]}
        for link in page.query_selector_all("main a[href^='/']"):
            href = link.get_attribute("href")
            assert href.startswith(f"/c/{name}/") or href.startswith("/accounts/"), href
    _switch(page, "local")
    assert page.url == base + "/"
    deadline = time.monotonic() + 60
    while True:
        states = {
            row.get_attribute("data-cluster"): row.get_attribute("data-state")
            for row in page.query_selector_all("#cluster-health tr[data-cluster]")
        }
        if states == {"local": "up", "secured": "up", "tansu": "up"}:
            break
        assert time.monotonic() < deadline, states
        page.wait_for_timeout(1000)
        page.reload()
    _shot(page, "overview")
    page.goto(base + "/topics/")
    assert "secured-orders" not in page.inner_text("main")
    assert problems == []
