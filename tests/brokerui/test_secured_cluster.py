"""The console on a secured external cluster: Tidelog's listener in its own process requiring
SASL/SCRAM-SHA-512 over TLS (a certificate made here), reached with a client.properties
file (TIDELOG_CLUSTER_CONFIG) whose password comes from the environment. Pages, the JSON API
and kafka-python's admin (OffsetDelete) work through it; a wrong password, an untrusted
certificate, a half-configured file are each one clear message, never a hang or a 500; the
password is in no page, log line or audit entry. (test_external_cluster.py runs its pages on
this cluster too.)"""

from __future__ import annotations

import json
import logging
import time

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from tests.secured_cluster import PASSWORD, SecuredListener


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with SecuredListener(tmp_path_factory.mktemp("secured")) as s:
        yield s


@pytest.fixture
def name(request) -> str:
    return f"sec-{request.node.name[5:30].replace('_', '-')}-{time.time_ns() % 10**9}"


def _text(response) -> str:
    return response.content.decode()


def test_pages_api_and_offset_delete_through_sasl_ssl(
    operator_client, external, server, name, caplog
):
    caplog.set_level(logging.DEBUG)
    response = operator_client.post(
        reverse("console:topic_create"),
        {"name": name, "partitions": "2", "cleanup_policy": "delete",
         "retention_ms": "3600000", "retention_bytes": "-1"},
    )  # fmt: skip
    assert response.status_code == 302
    producer = Producer(server.client_config)
    for i in range(4):
        producer.produce(name, value=json.dumps({"n": i}).encode(), key=b"k%d" % i, partition=i % 2)
    assert producer.flush(20) == 0

    pages = [
        reverse("console:topics"),
        reverse("console:topic", args=[name]),
        reverse("console:messages", args=[name]) + "?seek=oldest",
        reverse("console:groups"),
        "/api/v1/topics",
        f"/api/v1/topics/{name}",
    ]
    bodies = []
    for url in pages:
        response = operator_client.get(url)
        assert response.status_code == 200, (url, response.content[:300])
        bodies.append(_text(response))
    assert name in bodies[0]
    assert "k0" in bodies[2] and "&quot;n&quot;: 0" in bodies[2], bodies[2][-3000:]

    group = f"g-{name}"
    consumer = Consumer(
        {**server.client_config, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([name])
    seen, deadline = 0, time.monotonic() + 30
    while seen < 4 and time.monotonic() < deadline:
        seen += len([m for m in consumer.consume(10, 0.5) if not m.error()])
    consumer.commit(asynchronous=False)
    consumer.close()
    detail = operator_client.get(reverse("console:group", args=[group]))
    assert detail.status_code == 200 and name in _text(detail)
    bodies.append(_text(detail))

    # OffsetDelete goes through kafka-python's admin client, with the same SASL_SSL settings
    response = operator_client.post(
        reverse("console:group_delete_offsets", args=[group]), {"topic": name}, follow=True
    )
    assert f"Deleted the committed offsets of group {group} on {name}" in _text(response)
    probe = Consumer({**server.client_config, "group.id": group})
    committed = probe.committed([TopicPartition(name, 0), TopicPartition(name, 1)], timeout=20)
    probe.close()
    assert [tp.offset for tp in committed] == [OFFSET_INVALID, OFFSET_INVALID]
    bodies.append(_text(response))

    everything = (
        "".join(bodies)
        + caplog.text
        + "".join(json.dumps([e.before, e.after, e.target]) for e in AuditEntry.objects.all())
    )
    assert PASSWORD not in everything
    assert AuditEntry.objects.filter(action="topic.create", target=f"topic {name}").exists()


def test_a_wrong_password_is_one_clear_message(
    operator_client, external, server, settings, tmp_path, caplog
):
    from brokerui.cluster import close_external_clusters

    wrong = tmp_path / "wrong.properties"
    wrong.write_text(
        server.client_properties.read_text().replace(
            "${env:TIDELOG_TEST_CLUSTER_PASSWORD}", "not-the-password"
        )
    )
    close_external_clusters()
    settings.TIDELOG_CLUSTER_CONFIG = str(wrong)
    started = time.monotonic()
    response = operator_client.get(reverse("console:topics"))
    elapsed = time.monotonic() - started
    page = _text(response)
    assert response.status_code == 503, page[:500]
    assert "SASL authentication" in page or "Authentication failed" in page, page[:2000]
    assert "not-the-password" not in page and "not-the-password" not in caplog.text
    assert elapsed < 60  # bounded by the client timeout, never a hang
    api = operator_client.get("/api/v1/topics")
    assert api.status_code == 503 and "authentication" in _text(api).lower()
    close_external_clusters()


def test_an_untrusted_certificate_is_one_clear_message(
    operator_client, external, server, settings, tmp_path
):
    from brokerui.cluster import close_external_clusters
    from tests.tls import self_signed_cert

    other_ca, _ = self_signed_cert(tmp_path)  # not the listener's
    untrusted = tmp_path / "untrusted.properties"
    untrusted.write_text(
        server.client_properties.read_text().replace(str(server.cert), str(other_ca))
    )
    close_external_clusters()
    settings.TIDELOG_CLUSTER_CONFIG = str(untrusted)
    response = operator_client.get(reverse("console:topics"))
    page = _text(response)
    assert response.status_code == 503
    assert "certificate" in page.lower() and "SSL" in page, page[:2000]
    assert "certificate is not trusted: self-signed certificate" in page, page[:2000]
    close_external_clusters()


def test_an_expired_certificate_is_one_clear_message(operator_client, settings, tmp_path, caplog):
    """A listener whose certificate expired yesterday: the page says the certificate expired
    (librdkafka's reason), in bounded time, with no secret on the page or in the log."""
    from brokerui.cluster import close_external_clusters
    from tests.secured_cluster import PASSWORD, SecuredListener

    with SecuredListener(tmp_path / "expired", expired_cert=True) as expired:
        close_external_clusters()
        settings.TIDELOG_CLUSTER = expired.url
        settings.TIDELOG_CLUSTER_CONFIG = str(expired.client_properties)
        started = time.monotonic()
        response = operator_client.get(reverse("console:topics"))
        elapsed = time.monotonic() - started
        page = _text(response)
        close_external_clusters()
    assert response.status_code == 503, page[:500]
    # librdkafka says only "certificate verify failed"; the console's own handshake says why
    assert "certificate is not trusted: certificate has expired" in page, page[:2000]
    assert PASSWORD not in page and PASSWORD not in caplog.text
    assert elapsed < 60  # bounded by the client timeout, never a hang


def test_a_half_configured_file_is_refused_with_the_line(
    operator_client, external, settings, tmp_path
):
    from brokerui.cluster import close_external_clusters

    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n")
    close_external_clusters()
    settings.TIDELOG_CLUSTER_CONFIG = str(bad)
    response = operator_client.get(reverse("console:topics"))
    assert response.status_code == 503
    assert "SCRAM-SHA-512 needs a user and a password" in _text(response)
    close_external_clusters()
