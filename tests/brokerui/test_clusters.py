"""Several clusters in one console: the built-in broker (``local``, the default, at /) and
named external ones under /c/NAME/ — here Tidelog's listener requiring SCRAM-SHA-512 over TLS
(``secured``) and a cluster nobody listens on (``gone``). Each request works on its cluster,
every URL it renders stays there, the switcher names them all, the audit log says where a
change was made, and the unreachable one is a 503 of its own and a row on the overview that
never waits for it."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from brokerui import cluster as clusters
from brokerui import cluster_health
from brokerui.audit.models import AuditEntry
from brokerui.config import BUILTIN, ClusterEntry
from tests.kafka_servers import free_port
from tests.secured_cluster import SecuredListener


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with SecuredListener(tmp_path_factory.mktemp("clusters-secured")) as s:
        admin = AdminClient(s.client_config)
        admin.create_topics([NewTopic("remote-orders", 2)])["remote-orders"].result(30)
        yield s


@pytest.fixture
def three(settings, broker, secured):
    broker.store.create_topic("local-orders", 1)
    settings.TIDELOG_CLUSTERS = (
        ClusterEntry(BUILTIN),
        ClusterEntry("secured", secured.url, secured.client_properties),
        ClusterEntry("gone", f"kafka://127.0.0.1:{free_port()}"),
    )
    cluster_health.reset()
    yield
    clusters.close_external_clusters()


def text(response) -> str:
    return response.content.decode()


def test_each_cluster_under_its_own_prefix(operator_client, three):
    local = operator_client.get("/topics/")
    assert local.status_code == 200
    assert "local-orders" in text(local) and "remote-orders" not in text(local)

    remote = operator_client.get("/c/secured/topics/")
    page = text(remote)
    assert remote.status_code == 200, page[:500]
    assert "remote-orders" in page and "local-orders" not in page
    # the links of a cluster's page stay on it
    assert 'href="/c/secured/topics/remote-orders/"' in page
    assert 'href="/c/secured/groups/"' in page
    # the switcher: every cluster, this one current
    assert 'data-cluster="secured"' in page
    for name, url in (("local", "/"), ("secured", "/c/secured/"), ("gone", "/c/gone/")):
        assert f'href="{url}" data-cluster-link="{name}"' in page
    # the same API on both
    names = {t["name"] for t in operator_client.get("/c/secured/api/v1/topics").json()["topics"]}
    assert "remote-orders" in names and "local-orders" not in names
    names = {t["name"] for t in operator_client.get("/api/v1/topics").json()["topics"]}
    assert "local-orders" in names
    detail = operator_client.get("/c/secured/topics/remote-orders/")
    assert detail.status_code == 200 and "remote-orders" in text(detail)


def test_a_change_stays_on_its_cluster_and_the_audit_log_says_which(operator_client, three):
    name = f"made-remotely-{time.time_ns() % 10**9}"
    form = {"name": name, "partitions": "1", "cleanup_policy": "delete",
            "retention_ms": "3600000", "retention_bytes": "-1"}  # fmt: skip
    response = operator_client.post("/c/secured/new-topic/", form)
    assert response.status_code == 302, text(response)[:800]
    assert response.url == f"/c/secured/topics/{name}/"
    entry = AuditEntry.objects.get(action="topic.create", target=f"topic {name}")
    assert entry.cluster == "secured"
    operator_client.get(f"/c/secured/topics/{name}/")  # shows (and so clears) the flash
    local = text(operator_client.get("/topics/"))
    assert name not in local and "local-orders" in local
    audit = text(operator_client.get("/audit/"))
    assert 'data-audit-cluster="secured"' in audit


def test_an_unreachable_cluster_is_its_own_503_and_unknown_names_404(operator_client, three):
    gone = operator_client.get("/c/gone/topics/")
    assert gone.status_code == 503
    assert "did not answer" in text(gone) and 'data-cluster="gone"' in text(gone)
    api = operator_client.get("/c/gone/api/v1/topics")
    assert api.status_code == 503 and api.json()["error"]["code"] == "cluster_unavailable"
    missing = operator_client.get("/c/nope/topics/")
    assert missing.status_code == 404
    assert "There is no cluster &#x27;nope&#x27; (local, secured, gone)" in text(missing)
    assert operator_client.get("/c/secured/topics/").status_code == 200


def test_the_overview_shows_every_clusters_health_without_waiting(
    operator_client, three, monkeypatch
):
    held = threading.Event()
    real_check = cluster_health.check

    def check(entry):  # the unreachable cluster's check stays in flight until released
        if entry.name == "gone":
            held.wait(60)
        return real_check(entry)

    monkeypatch.setattr(cluster_health, "check", check)
    try:
        deadline = time.monotonic() + 60
        while True:
            page = text(operator_client.get("/"))
            rows = dict(re.findall(r'<tr data-cluster="([^"]+)" data-state="([^"]+)"', page))
            if rows.get("secured") == "up":
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.2)
        # gone's check has not answered: the overview did not wait for it
        assert rows == {"local": "up", "secured": "up", "gone": "unknown"}
    finally:
        held.set()
    deadline = time.monotonic() + 60
    while dict(re.findall(r'<tr data-cluster="([^"]+)" data-state="([^"]+)"',
                          text(operator_client.get("/")))).get("gone") != "down":  # fmt: skip
        assert time.monotonic() < deadline
        time.sleep(0.5)
    health = {h.name: h for h in cluster_health.snapshot()}
    assert "did not answer" in health["gone"].detail
    assert health["secured"].topics >= 1 and health["local"].topics >= 1


def test_the_toml_file_names_the_clusters(tmp_path, secured):
    from brokerui.config import Config, ConfigError

    (tmp_path / "prod.properties").write_text(secured.client_properties.read_text())
    toml = tmp_path / "tidelog.toml"
    toml.write_text(
        "[clusters.prod]\n"
        f'bootstrap = "{secured.bootstrap}"\n'
        'client_properties = "prod.properties"\n'
        "[clusters.staging]\n"
        'bootstrap = "kafka://10.0.0.5:9092,10.0.0.6:9092"\n'
    )
    config = Config.from_env({"TIDELOG_CONFIG": str(toml)})
    assert [(c.name, c.url) for c in config.clusters] == [
        ("local", None),
        ("prod", f"kafka://{secured.bootstrap}"),
        ("staging", "kafka://10.0.0.5:9092,10.0.0.6:9092"),
    ]
    assert config.clusters[1].client_properties == tmp_path / "prod.properties"
    assert config.cluster_url is None  # the default is the built-in broker
    toml.write_text('builtin = false\n[clusters.prod]\nbootstrap = "k:9092"\n')
    only = Config.from_env({"TIDELOG_CONFIG": str(toml)})
    assert only.cluster_url == "kafka://k:9092"  # the default is external: no local broker
    for bad, reason in (
        ('[clusters.Prod]\nbootstrap = "k:1"\n', "lower-case"),
        ("[clusters.prod]\n", "bootstrap = ... is missing"),
        ('[clusters.prod]\nbootstrap = "nope"\n', "expected kafka://host:port"),
        ('[clusters.prod]\nbootstrap = "k:1"\nclient_properties = "x.properties"\n',
         "no such file"),
        ("builtin = false\n", "no clusters"),
        ("[clusters\n", "not TOML"),
        ('colour = "blue"\n', "unknown settings"),
    ):  # fmt: skip
        toml.write_text(bad)
        with pytest.raises(ConfigError, match=reason):
            Config.from_env({"TIDELOG_CONFIG": str(toml)})
    assert json.dumps([c.name for c in config.clusters])


def test_the_checker_stops_quietly_when_its_pool_is_shut_down(monkeypatch):
    """At interpreter exit the checks' pool takes no more work: the checker's thread ends
    instead of dying with "cannot schedule new futures after shutdown"."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    pool.shutdown()
    monkeypatch.setattr(cluster_health, "_pool", pool)
    two = (ClusterEntry(BUILTIN), ClusterEntry("other", "kafka://127.0.0.1:1"))
    monkeypatch.setattr(clusters, "entries", lambda: two)
    cluster_health._run()  # returns; before, it raised RuntimeError
    assert cluster_health._thread is None
