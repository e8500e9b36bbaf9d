"""Kafka's ACL APIs on the listener (DescribeAcls, CreateAcls, DeleteAcls) with confluent-kafka's
and kafka-python's admin clients, and their enforcement for SASL principals in Kafka's order
(super users, deny wins, then allow, then the console role), with Kafka's error codes; the
bindings survive a restart (``__acls``) and every change and ACL refusal is audited.

Users (tests/protocol/sasl_users.py): olivia is an operator, victor a viewer, nora has no role.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from streams.protocol import codec
from tests.protocol.conftest import open_broker
from tests.protocol.sasl_users import PASSWORDS, Users
from tests.protocol.wire import WireClient

TIMEOUT = 20


class Sink:
    def __init__(self):
        self.events = []

    def record(self, event):
        self.events.append(event)


@pytest.fixture
def sink():
    return Sink()


@pytest.fixture
def broker(tmp_path, sink):
    b = open_broker(
        tmp_path / "data", authenticator=Users(), audit=sink, super_users=frozenset({"User:nora"})
    )
    yield b
    b.close()


@pytest.fixture
def bootstrap(broker) -> str:
    host, port = broker.kafka_address
    return f"{host}:{port}"


def conf(bootstrap: str, user: str, **extra) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
        **extra,
    }


def admin(bootstrap: str, user: str = "olivia") -> AdminClient:
    return AdminClient(conf(bootstrap, user))


def binding(name, op=AclOperation.READ, perm=AclPermissionType.ALLOW, *,
            rtype=ResourceType.TOPIC, pattern=ResourcePatternType.LITERAL,
            principal="User:victor", host="*") -> AclBinding:  # fmt: skip
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


EVERYTHING = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
    AclOperation.ANY, AclPermissionType.ANY,
)  # fmt: skip


def create(a: AdminClient, *bindings) -> None:
    for future in a.create_acls(list(bindings), request_timeout=TIMEOUT).values():
        future.result(TIMEOUT)


def produce(bootstrap: str, user: str, topic: str) -> KafkaError | None:
    """The delivery error of one record (None: written)."""
    outcome = []
    p = Producer(conf(bootstrap, user, **{"message.timeout.ms": 8000, "acks": "all"}))
    p.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(TIMEOUT)
    return outcome[0]


def read_error(bootstrap: str, user: str, topic: str) -> int | None:
    """The error code fetching `topic` gives `user` (None: a record came)."""
    c = Consumer(conf(bootstrap, user, **{"group.id": f"g-{user}", "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            return m.error().code() if m.error() else None
        raise AssertionError("neither a record nor an error")
    finally:
        c.close()


def test_create_describe_delete_with_confluent_kafka(bootstrap, sink):
    a = admin(bootstrap)
    create(
        a,
        binding("orders"),
        binding("team-a.", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
        binding("billing", AclOperation.ALL, rtype=ResourceType.GROUP, principal="User:*"),
        binding("kafka-cluster", AclOperation.DESCRIBE, rtype=ResourceType.BROKER),
        binding("tx-1", AclOperation.WRITE, rtype=ResourceType.TRANSACTIONAL_ID,
                perm=AclPermissionType.DENY, host="10.0.0.7"),
    )  # fmt: skip
    got = a.describe_acls(EVERYTHING, request_timeout=TIMEOUT).result(TIMEOUT)
    assert len(got) == 5
    by_name = {b.name: b for b in got}
    assert by_name["team-a."].resource_pattern_type == ResourcePatternType.PREFIXED
    assert by_name["team-a."].operation == AclOperation.WRITE
    assert by_name["billing"].principal == "User:*"
    assert by_name["kafka-cluster"].restype == ResourceType.BROKER
    tx = by_name["tx-1"]
    assert (tx.restype, tx.permission_type, tx.host) == (
        ResourceType.TRANSACTIONAL_ID, AclPermissionType.DENY, "10.0.0.7"
    )  # fmt: skip
    # MATCH: every binding that applies to the topic team-a.clicks
    applying = AclBindingFilter(
        ResourceType.TOPIC, "team-a.clicks", ResourcePatternType.MATCH, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert [b.name for b in a.describe_acls(applying).result(TIMEOUT)] == ["team-a."]
    deleted = a.delete_acls([applying], request_timeout=TIMEOUT)
    assert [b.name for b in list(deleted.values())[0].result(TIMEOUT)] == ["team-a."]
    assert len(a.describe_acls(EVERYTHING).result(TIMEOUT)) == 4
    actions = [(e.action, e.target, e.user) for e in sink.events]
    assert ("acl.create", "acl topic team-a.", "olivia") in actions
    assert ("acl.delete", "acl topic team-a.", "olivia") in actions
    created = next(e for e in sink.events if e.action == "acl.create" and "orders" in e.target)
    assert created.after == {
        "resource_type": "TOPIC", "name": "orders", "pattern_type": "LITERAL",
        "principal": "User:victor", "host": "*", "operation": "READ", "permission": "ALLOW",
    }  # fmt: skip


def test_kafka_python_admin_round_trip(bootstrap):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType

    client = KafkaAdminClient(
        bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="olivia",
        sasl_plain_password=PASSWORDS["olivia"],
    )  # fmt: skip
    try:
        pattern = ResourcePattern(KResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
        made = client.create_acls(
            [ACL("User:victor", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)]
        )
        assert made["failed"] == [] and len(made["succeeded"]) == 1
        flt = ACLFilter(
            principal=None, host=None, operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                KResourceType.TOPIC, None, ACLResourcePatternType.ANY
            ),
        )  # fmt: skip
        found, error = client.describe_acls(flt)
        assert error.errno == 0
        assert [(x.principal, x.operation, x.resource_pattern.resource_name) for x in found] == [
            ("User:victor", ACLOperation.WRITE, "kp-")
        ]
        [(_flt, removed, error)] = client.delete_acls([flt])
        assert error.errno == 0
        assert [x.resource_pattern.resource_name for x in removed] == ["kp-"]
        assert client.describe_acls(flt)[0] == []
    finally:
        client.close()


def test_enforced_in_kafkas_order_with_kafkas_error_codes(broker, bootstrap, sink):
    for topic in ("team-a.orders", "team-b.orders", "secret"):
        broker.store.create_topic(topic, 1)
        broker.store.append(topic, b"x", partition=0)
    # a viewer may not write by its role: an ALLOW on team-a.* lets it write there only
    assert (
        produce(bootstrap, "victor", "team-a.orders").code()
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    a = admin(bootstrap)
    create(
        a,
        binding("team-a.", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
        binding("kafka-cluster", AclOperation.IDEMPOTENT_WRITE, rtype=ResourceType.BROKER),
        # deny wins over the operator's role
        binding("secret", AclOperation.READ, AclPermissionType.DENY, principal="User:olivia"),
        binding("*", AclOperation.ALL, AclPermissionType.DENY, principal="User:nora"),
    )
    assert produce(bootstrap, "victor", "team-a.orders") is None
    assert (
        produce(bootstrap, "victor", "team-b.orders").code()
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert read_error(bootstrap, "olivia", "team-b.orders") is None
    assert read_error(bootstrap, "olivia", "secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # olivia's topic list leaves out what she may not DESCRIBE? READ denied, DESCRIBE is not
    listed = admin(bootstrap).list_topics(timeout=TIMEOUT).topics
    assert "secret" in listed
    create(a, binding("secret", AclOperation.DESCRIBE, AclPermissionType.DENY,
                      principal="User:olivia"))  # fmt: skip
    listed = admin(bootstrap).list_topics(timeout=TIMEOUT).topics
    assert "secret" not in listed and "team-a.orders" in listed
    # a super user passes even a DENY of everything
    assert read_error(bootstrap, "nora", "secret") is None
    # a viewer may not change ACLs: CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        create(admin(bootstrap, "victor"), binding("x"))
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    denied = [(e.action, e.target, e.user, e.after["operation"]) for e in sink.events
              if e.action == "acl.denied"]  # fmt: skip
    assert ("acl.denied", "topic secret", "olivia", "READ") in denied


def test_the_bindings_survive_a_restart(tmp_path):
    users = Users()
    broker = open_broker(tmp_path / "data", authenticator=users)
    host, port = broker.kafka_address
    first = admin(f"{host}:{port}")
    create(first, binding("orders"), binding("o", pattern=ResourcePatternType.PREFIXED))
    broker.close()
    broker = open_broker(tmp_path / "data", authenticator=users)
    try:
        host, port = broker.kafka_address
        again = admin(f"{host}:{port}")
        got = again.describe_acls(EVERYTHING).result(TIMEOUT)
        assert sorted(b.name for b in got) == ["o", "orders"]
        assert "__acls" in broker.store.list_topics()
    finally:
        broker.close()


def _plain(c: WireClient, user: str) -> None:
    assert c.call(17, 1, mechanism="PLAIN").error_code == 0
    token = b"\0" + user.encode() + b"\0" + PASSWORDS[user].encode()
    assert c.call(36, 2, auth_bytes=token).error_code == 0


def test_an_unknown_operation_is_invalid_request_with_the_reason(bootstrap):
    with WireClient(bootstrap) as c:
        _plain(c, "olivia")
        creation = {
            "resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
            "principal": "User:victor", "host": "*", "permission_type": 3,
        }  # fmt: skip
        make = codec.request_class(30).AclCreation
        creations = [
            make(**creation, operation=99),
            make(**creation, operation=3),
            make(**{**creation, "principal": "victor"}, operation=3),
        ]
        resp = c.call(30, 3, creations=creations)
        codes = [(r.error_code, r.error_message) for r in resp.results]
        assert codes[0] == (42, "Invalid ACL: unknown operation code 99")
        assert codes[1] == (0, None)
        assert codes[2][0] == 42 and "expected TYPE:NAME" in codes[2][1]
        flt = {"resource_type_filter": 9, "resource_name_filter": None, "pattern_type_filter": 1,
               "principal_filter": None, "host_filter": None, "operation": 1,
               "permission_type": 1}  # fmt: skip
        resp = c.call(29, 3, **flt)
        assert (resp.error_code, resp.error_message) == (42, "unknown resource type code 9")


def test_without_sasl_the_acl_apis_say_security_disabled(tmp_path):
    """Kafka's answer on a broker without an authorizer. (confluent-kafka 2.16's describe_acls
    returns [] for it: librdkafka drops DescribeAcls' top-level error; kafka-python raises.)"""
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import SecurityDisabledError

    broker = open_broker(tmp_path / "data")
    try:
        host, port = broker.kafka_address
        client = KafkaAdminClient(bootstrap_servers=f"{host}:{port}")
        flt = ACLFilter(
            principal=None, host=None, operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                KResourceType.ANY, None, ACLResourcePatternType.ANY
            ),
        )  # fmt: skip
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured"):
            client.describe_acls(flt)
        client.close()
        a = AdminClient({"bootstrap.servers": f"{host}:{port}"})
        with pytest.raises(KafkaException) as disabled:
            list(a.create_acls([binding("t")]).values())[0].result(TIMEOUT)
        assert disabled.value.args[0].code() == KafkaError.SECURITY_DISABLED
    finally:
        broker.close()
