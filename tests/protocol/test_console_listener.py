"""The console's broker (`brokerui.broker.get_broker`) serves the Kafka protocol on
TIDELOG_KAFKA_PORT unless TIDELOG_KAFKA_LISTENER is off."""

from __future__ import annotations

import socket

from kafka import KafkaProducer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_console_broker_starts_and_stops_the_listener(settings, tmp_path):
    from brokerui.broker import close_broker, get_broker

    close_broker()
    port = _free_port()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    settings.TIDELOG_KAFKA_LISTENER = True
    settings.TIDELOG_KAFKA_PORT = port
    try:
        broker = get_broker()
        assert broker.kafka_address == ("127.0.0.1", port)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        producer.send("via-console", b"hello").get(timeout=30)
        producer.close()
        assert [r.value for r in broker.store.read("via-console", 0, 0)] == [b"hello"]
    finally:
        close_broker()
    with socket.socket() as s:  # closed with the broker: nothing listens on the port any more
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


def test_listener_off(settings, tmp_path):
    from brokerui.broker import close_broker, get_broker

    close_broker()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    settings.TIDELOG_KAFKA_LISTENER = False
    try:
        assert get_broker().kafka_address is None
    finally:
        close_broker()
