"""The capture tests' private PostgreSQL (a fresh database per test), and the console's broker
with its Kafka listener on a free port (what the dual-write page's cdc mode connects to)."""

from __future__ import annotations

import pytest

from tests.capture.conftest import pg_dsn, postgres_server  # noqa: F401
from tests.kafka_servers import free_port


@pytest.fixture
def listening_broker(settings, tmp_path):
    from brokerui.broker import close_broker, get_broker

    close_broker()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    settings.TIDELOG_KAFKA_LISTENER = True
    settings.TIDELOG_KAFKA_PORT = free_port()
    yield get_broker()
    close_broker()
