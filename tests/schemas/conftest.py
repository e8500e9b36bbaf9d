"""A registry served on a free loopback port over a fresh log store (no Django)."""

from __future__ import annotations

import pytest

from streams.log import LogStore
from streams.schemas import RegistryConfig, RegistryServer, SchemaRegistry, StoreSchemaLog


@pytest.fixture
def store(tmp_path):
    s = LogStore.open(tmp_path / "data")
    yield s
    s.close()


@pytest.fixture
def registry(store):
    return SchemaRegistry(StoreSchemaLog(store))


@pytest.fixture
def server(registry):
    srv = RegistryServer(registry, RegistryConfig(port=0)).start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": server.url})
