"""Fixtures for the Kafka listener tests: a broker on a temporary data dir whose listener
binds port 0, with group timings short enough for fast rebalances."""

from __future__ import annotations

import pytest

from streams.broker.runtime import Broker
from streams.protocol import ListenerConfig

# a new group waits this long for more members before its first rebalance completes
INITIAL_REBALANCE_DELAY_MS = 300


def open_broker(data_dir, **listener_options) -> Broker:
    return Broker.open(
        data_dir,
        kafka_listener=ListenerConfig(**{"port": 0, **listener_options}),
        coordinator_options={"initial_rebalance_delay_ms": INITIAL_REBALANCE_DELAY_MS},
    )


@pytest.fixture
def broker(tmp_path):
    b = open_broker(tmp_path / "data")
    yield b
    b.close()


@pytest.fixture
def bootstrap(broker) -> str:
    host, port = broker.kafka_address
    return f"{host}:{port}"
