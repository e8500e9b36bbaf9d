"""Logged-in clients for the console tests (the broker and users come from tests/conftest.py),
and the console pointed at an external Kafka-protocol cluster: Tidelog's listener in a
separate process."""

from __future__ import annotations

import pytest


@pytest.fixture
def operator_client(client, operator):
    """A logged-in operator (may change things)."""
    client.force_login(operator)
    return client


@pytest.fixture
def viewer_client(client, viewer):
    """A logged-in viewer (read only)."""
    client.force_login(viewer)
    return client


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Tidelog's Kafka listener in a process of its own, one per test module."""
    from tests.kafka_servers import kafka_server

    with kafka_server(str(tmp_path_factory.mktemp("kafka"))) as s:
        yield s


@pytest.fixture
def external(settings, server, monkeypatch):
    """The console pointed at `server`; opening the local broker fails the test."""
    from brokerui import broker, cluster

    def no_local_broker(*args, **kwargs):
        raise AssertionError("the console opened the local broker on an external cluster")

    broker.close_broker()
    # patched on the class: modules holding their own reference to get_broker() are covered
    monkeypatch.setattr(broker.Broker, "open", no_local_broker)
    settings.TIDELOG_CLUSTER = server.url
    # a secured server (tests/secured_cluster.py) names its client properties
    settings.TIDELOG_CLUSTER_CONFIG = getattr(server, "client_properties", None)
    yield cluster.get_cluster()
    cluster.close_external_clusters()
