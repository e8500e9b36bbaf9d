"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), TLS and role-based authorisation on the Kafka
listener, with confluent-kafka and kafka-python, and Kafka's SASL state machine on the wire.

The users live in an in-memory `Authenticator` (the listener's seam); the console's own users
behind it are tested in tests/brokerui/test_kafka_port.py."""

from __future__ import annotations

import logging
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import errors as kafka_errors

from streams.protocol import server as listener_server
from streams.protocol.security import Role
from tests.protocol.conftest import open_broker
from tests.protocol.sasl_users import PASSWORDS, Users
from tests.protocol.wire import WireClient
from tests.tls import self_signed_cert

DEADLINE_S = 30
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.fixture
def users():
    return Users()


@pytest.fixture
def sasl_broker(tmp_path, users):
    broker = open_broker(tmp_path / "data", authenticator=users)
    yield broker
    broker.close()


@pytest.fixture
def sasl_bootstrap(sasl_broker) -> str:
    host, port = sasl_broker.kafka_address
    return f"{host}:{port}"


@pytest.fixture
def tls_files(tmp_path):
    return self_signed_cert(tmp_path)


def _rdkafka(bootstrap, mechanism, user, password=None, protocol="SASL_PLAINTEXT", **extra):
    config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": protocol,
        **extra,
    }
    if protocol.startswith("SASL"):
        config.update(
            {
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": PASSWORDS.get(user, "") if password is None else password,
            }
        )
    return config


def _kafka_python(bootstrap, mechanism, user, protocol="SASL_PLAINTEXT", **extra):
    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user],
        **extra,
    }


def _produce_confluent(config: dict, topic: str, values: list[bytes]) -> list:
    producer = Producer({"linger.ms": 5, "message.timeout.ms": 20000, **config})
    errors = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(DEADLINE_S)
    return errors


def _consume_confluent(config: dict, topic: str, count: int, group: str) -> list[bytes]:
    consumer = Consumer(
        {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False, **config}
    )
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + DEADLINE_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(msg.value())
        consumer.commit(asynchronous=False)  # as a group member: a viewer may
    finally:
        consumer.close()
    return got


# ---------------------------------------------------------------------- clients


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_operator_produces_and_viewer_consumes(
    sasl_broker, sasl_bootstrap, mechanism
):
    topic = f"orders-{mechanism.lower()}"
    values = [b"order %d" % i for i in range(20)]
    errors = _produce_confluent(_rdkafka(sasl_bootstrap, mechanism, "olivia"), topic, values)
    assert errors == [None] * len(values)
    viewer = _rdkafka(sasl_bootstrap, mechanism, "victor")
    assert _consume_confluent(viewer, topic, len(values), "billing") == values
    committed = sasl_broker.coordinator.committed("billing")
    assert committed[(topic, 0)].offset == len(values)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_operator_produces_and_viewer_consumes(sasl_broker, sasl_bootstrap, mechanism):
    topic = f"clicks-{mechanism.lower()}"
    producer = KafkaProducer(**_kafka_python(sasl_bootstrap, mechanism, "olivia"))
    for i in range(10):
        producer.send(topic, b"click %d" % i).get(timeout=DEADLINE_S)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        group_id="analytics",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=DEADLINE_S * 1000,
        **_kafka_python(sasl_bootstrap, mechanism, "victor"),
    )
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == 10:
            break
    consumer.commit()
    consumer.close()
    assert got == [b"click %d" % i for i in range(10)]
    assert sasl_broker.coordinator.committed("analytics")[(topic, 0)].offset == 10


def test_tls_with_and_without_sasl(tmp_path, users, tls_files, caplog):
    cert, key = tls_files
    for authenticator, protocol in ((users, "SASL_SSL"), (None, "SSL")):
        broker = open_broker(
            tmp_path / protocol,
            tls_cert_file=str(cert),
            tls_key_file=str(key),
            authenticator=authenticator,
        )
        try:
            assert broker.kafka_security_protocol == protocol
            host, port = broker.kafka_address
            bootstrap = f"{host}:{port}"
            rdkafka = _rdkafka(
                bootstrap,
                "SCRAM-SHA-512",
                "olivia",
                protocol=protocol,
                **{"ssl.ca.location": str(cert)},
            )
            assert _produce_confluent(rdkafka, "secure", [b"a", b"b"]) == [None, None]
            assert _consume_confluent(rdkafka, "secure", 2, "g") == [b"a", b"b"]
            producer = KafkaProducer(
                bootstrap_servers=bootstrap,
                security_protocol=protocol,
                ssl_cafile=str(cert),
                **(
                    {
                        "sasl_mechanism": "PLAIN",
                        "sasl_plain_username": "olivia",
                        "sasl_plain_password": PASSWORDS["olivia"],
                    }
                    if authenticator
                    else {}
                ),
            )
            producer.send("secure", b"c").get(timeout=DEADLINE_S)
            producer.close()
            records = broker.store.read("secure", 0, 0)
            assert [r.value for r in records] == [b"a", b"b", b"c"]
            with pytest.raises(ConnectionError):  # a plaintext client is not answered
                with WireClient(bootstrap, timeout=5) as c:
                    c.call(18, 3, client_software_name="x", client_software_version="1")
            deadline = time.monotonic() + 10  # logged once asyncio hands the failure over
            while not any("TLS handshake with" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "the failed handshake was not logged"
                time.sleep(0.05)
        finally:
            broker.close()


# ---------------------------------------------------------------------- authorisation


def test_a_viewer_may_read_but_not_write(sasl_broker, sasl_bootstrap):
    sasl_broker.store.create_topic("ledger", 1)
    viewer = _rdkafka(sasl_bootstrap, "SCRAM-SHA-256", "victor")
    errors = _produce_confluent(viewer, "ledger", [b"forged"])
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert sasl_broker.store.read("ledger", 0, 0) == []

    admin = AdminClient(viewer)
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic("new-topic", 1)])["new-topic"].result(DEADLINE_S)
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as exc:
        admin.delete_topics(["ledger"])["ledger"].result(DEADLINE_S)
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as exc:
        admin.delete_consumer_groups(["billing"])["billing"].result(DEADLINE_S)
    assert exc.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert "ledger" in sasl_broker.store.list_topics()
    assert "new-topic" not in sasl_broker.store.list_topics()

    # metadata for a topic that does not exist creates nothing for a viewer (Kafka: CREATE)
    metadata = admin.list_topics("not-created", timeout=DEADLINE_S)
    assert metadata.topics["not-created"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert "not-created" not in sasl_broker.store.list_topics()

    # kafka-python's producer gets Kafka's exception too
    producer = KafkaProducer(**_kafka_python(sasl_bootstrap, "PLAIN", "victor"), retries=0)
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        producer.send("ledger", b"forged").get(timeout=DEADLINE_S)
    producer.close()


def test_a_viewers_admin_commit_is_refused_but_a_members_commit_is_not(sasl_broker, sasl_bootstrap):
    sasl_broker.store.create_topic("ledger", 1)
    viewer = _rdkafka(sasl_bootstrap, "PLAIN", "victor")
    consumer = Consumer({"group.id": "standalone", **viewer})
    with pytest.raises(KafkaException) as exc:  # generation -1: what a reset does
        consumer.commit(offsets=[TopicPartition("ledger", 0, 0)], asynchronous=False)
    consumer.close()
    assert exc.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert sasl_broker.coordinator.committed("standalone") == {}


def test_a_user_without_a_role_is_refused_everything(sasl_broker, sasl_bootstrap):
    sasl_broker.store.create_topic("ledger", 1)
    sasl_broker.store.append("ledger", b"secret")
    config = _rdkafka(sasl_bootstrap, "SCRAM-SHA-512", "nora")
    metadata = AdminClient(config).list_topics(timeout=DEADLINE_S)
    assert metadata.topics == {}  # Kafka lists only the topics one may describe
    consumer = Consumer({"group.id": "spies", "auto.offset.reset": "earliest", **config})
    consumer.assign([TopicPartition("ledger", 0, 0)])
    deadline, error = time.monotonic() + DEADLINE_S, None
    while error is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is not None, msg.value()
            error = msg.error()
    consumer.close()
    assert error is not None
    assert error.code() in (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,  # its group coordinator is refused first
    )


def test_a_changed_role_applies_to_open_connections(
    sasl_broker, sasl_bootstrap, users, monkeypatch
):
    monkeypatch.setattr(listener_server, "ROLE_REFRESH_S", 0.0)
    producer = Producer(_rdkafka(sasl_bootstrap, "PLAIN", "olivia", **{"linger.ms": 0}))
    errors = []
    producer.produce("ledger", b"one", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(DEADLINE_S)
    users.roles["olivia"] = Role.VIEWER
    producer.produce("ledger", b"two", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(DEADLINE_S)
    assert errors[0] is None
    assert errors[1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert [r.value for r in sasl_broker.store.read("ledger", 0, 0)] == [b"one"]


# ---------------------------------------------------------------------- authentication


def _first_error(config: dict) -> KafkaError:
    """The first error librdkafka reports for a client with `config`."""
    seen: list[KafkaError] = []
    admin = AdminClient({**config, "error_cb": seen.append})
    deadline = time.monotonic() + DEADLINE_S
    while not seen and time.monotonic() < deadline:
        admin.poll(0.1)
    assert seen, "no error reported"
    return seen[0]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_is_refused(sasl_bootstrap, mechanism, caplog):
    error = _first_error(_rdkafka(sasl_bootstrap, mechanism, "olivia", password="guess"))
    assert error.code() == KafkaError._AUTHENTICATION
    assert "Invalid username or password" in error.str()
    assert any("authentication failed" in r.getMessage() for r in caplog.records)
    ghost = _rdkafka(sasl_bootstrap, mechanism, f"ghost-{uuid.uuid4()}", "x")
    assert _first_error(ghost).code() == KafkaError._AUTHENTICATION


def test_kafka_python_with_a_wrong_password(sasl_bootstrap, caplog):
    caplog.set_level(logging.WARNING, logger="kafka")
    config = _kafka_python(sasl_bootstrap, "SCRAM-SHA-256", "olivia")
    config["sasl_plain_password"] = "guess"
    with pytest.raises(kafka_errors.KafkaTimeoutError):  # it retries until then
        KafkaProducer(**config, bootstrap_timeout_ms=3000)
    failures = [r.getMessage() for r in caplog.records if r.name.startswith("kafka")]
    assert any("Invalid username or password" in m for m in failures), failures


def test_a_failed_authentication_is_answered_and_not_half_closed(sasl_bootstrap, monkeypatch):
    """After the failure response the connection stays open (Kafka's delayed close), not
    half-closed at once: kafka-python 3.0 drops a response it reads together with the end of
    the stream, and reported "socket disconnected" instead of the failure under load."""
    monkeypatch.setattr(listener_server, "FAILED_AUTHENTICATION_DELAY_S", 5.0)
    with WireClient(sasl_bootstrap) as c:
        assert c.call(17, 1, mechanism="PLAIN").error_code == 0
        resp = c.call(36, 2, auth_bytes=_plain_token("olivia", "wrong"))
        assert resp.error_code == 58  # SASL_AUTHENTICATION_FAILED
        time.sleep(0.3)  # what a loaded client takes to read on: the stream has not ended
        c.sock.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing to read, and no end of stream (b"")
            c.sock.recv(1)


def _api_versions(c: WireClient):
    return c.call(18, 3, client_software_name="wire", client_software_version="1")


def _plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def test_before_authentication_only_api_versions_and_the_handshake_are_served(sasl_bootstrap):
    with WireClient(sasl_bootstrap) as c:
        assert _api_versions(c).error_code == 0
        c.send(3, 12, topics=None)  # Metadata: Kafka closes the connection, unanswered
        assert c.is_closed_by_peer()
    with WireClient(sasl_bootstrap) as c:
        resp = c.call(17, 1, mechanism="GSSAPI")
        assert resp.error_code == 33  # UNSUPPORTED_SASL_MECHANISM, with the enabled ones
        assert list(resp.mechanisms) == MECHANISMS
        assert c.is_closed_by_peer()
    with WireClient(sasl_bootstrap) as c:
        assert c.call(17, 1, mechanism="PLAIN").error_code == 0
        resp = c.call(16, 4, states_filter=[])  # during the exchange: ILLEGAL_SASL_STATE
        assert resp.error_code == 34  # then the connection is closed
        assert c.is_closed_by_peer()


def test_sasl_authenticate_on_the_wire(sasl_bootstrap):
    with WireClient(sasl_bootstrap) as c:
        assert c.call(17, 1, mechanism="PLAIN").error_code == 0
        resp = c.call(36, 2, auth_bytes=_plain_token("olivia", "wrong"))
        assert resp.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert c.is_closed_by_peer()
    with WireClient(sasl_bootstrap) as c:
        assert c.call(17, 1, mechanism="PLAIN").error_code == 0
        resp = c.call(36, 2, auth_bytes=_plain_token("olivia", PASSWORDS["olivia"]))
        assert (resp.error_code, resp.session_lifetime_ms) == (0, 0)
        assert c.call(3, 12, topics=None).brokers[0].node_id == 0
        assert c.call(17, 1, mechanism="PLAIN").error_code == 34  # no re-authentication


def test_a_v0_handshake_exchanges_raw_tokens(sasl_bootstrap):
    with WireClient(sasl_bootstrap) as c:
        assert c.call(17, 0, mechanism="PLAIN").error_code == 0
        token = _plain_token("victor", PASSWORDS["victor"])
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.recv_frame() == b""
        assert c.call(3, 12, topics=None).brokers[0].node_id == 0


def test_a_big_frame_before_authentication_closes_the_connection(sasl_bootstrap, caplog):
    caplog.set_level(logging.WARNING, logger="streams.protocol")
    with WireClient(sasl_bootstrap) as c:
        c.send_raw(struct.pack(">i", 10 * 1024 * 1024) + b"\0" * 1024)
        assert c.is_closed_by_peer()
    assert any("outside [8, 524288]" in r.getMessage() for r in caplog.records)


def test_an_open_listener_answers_the_sasl_apis_with_illegal_sasl_state(bootstrap):
    with WireClient(bootstrap) as c:
        assert c.call(17, 1, mechanism="PLAIN").error_code == 34
        assert c.call(36, 2, auth_bytes=b"").error_code == 34
        assert c.call(3, 12, topics=None).brokers[0].node_id == 0


def test_refusals_of_requests_naming_topics_by_id_answer_by_id(sasl_broker, sasl_bootstrap):
    """Produce v13 names topics by id (KIP-516): a viewer's refusal carries the id back, so the
    client can tell which topic it concerns."""
    import uuid

    from streams.log import records as rb
    from streams.log.records import ProducerRecord
    from streams.protocol import codec

    sasl_broker.store.create_topic("ledger", 1)
    topic_id = uuid.UUID(hex=sasl_broker.store.topic_id("ledger"))
    p = codec.request_class(0)[13].TopicProduceData
    batch = rb.build_batch([ProducerRecord(b"forged")], now_ms=1_700_000_000_000)
    with WireClient(sasl_bootstrap) as c:
        assert c.call(17, 1, mechanism="PLAIN").error_code == 0
        assert c.call(36, 2, auth_bytes=_plain_token("victor", PASSWORDS["victor"])).error_code == 0
        resp = c.call(
            0,
            13,
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[p(topic_id=topic_id, partition_data=[p.PartitionProduceData(0, batch)])],
        )
    [topic] = resp.responses
    assert topic.topic_id == topic_id
    assert [r.error_code for r in topic.partition_responses] == [29]  # TOPIC_AUTHORIZATION_FAILED
    assert sasl_broker.store.read("ledger", 0, 0) == []
