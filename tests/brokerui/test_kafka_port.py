"""The Kafka port of the server as `make run` starts it (``manage.py runserver`` in a process of
its own, with the listener on): its start-up line names the mode; with TIDELOG_KAFKA_SASL and a
TLS certificate the console's users sign in with SASL PLAIN and SCRAM-SHA-256/512 (confluent-
kafka and kafka-python) and get their console role; admin changes made with confluent-kafka's
AdminClient land in the console's audit log with the client id and address as "who"."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from tests.kafka_servers import free_port
from tests.tls import self_signed_cert

REPO_DIR = Path(__file__).resolve().parents[2]
DEADLINE_S = 30
PASSWORDS = {
    "olivia": "operator-pass-123",
    "victor": "viewer-pass-123",
    "nora": "no-role-pass-123",
    "carol": "created-pass-123",
    "walter": "first-pass-123",
    "sam": "super-pass-123",  # no role, but a super user (TIDELOG_KAFKA_SUPER_USERS)
    "tess": "team-a-pass-123",  # bound: operator of the topics team-a.*, viewer of the cluster
}
# users as an operator adds them: set_password then save (Django's password-changed hook), and
# carol as create_user(password=...) makes her (no hook: SCRAM after a first sign-in)
SETUP = """
from django.contrib.auth.models import Group, User
roles = {"olivia": "operator", "victor": "viewer", "nora": None, "walter": "viewer", "sam": None}
for name, role in roles.items():
    user = User.objects.create_user(name)
    user.set_password(PASSWORDS[name])
    user.save()
    if role:
        user.groups.add(Group.objects.get(name=role))
carol = User.objects.create_user("carol", password=PASSWORDS["carol"])
carol.groups.add(Group.objects.get(name="operator"))
from brokerui.access.models import RoleBinding
tess = User.objects.create_user("tess")
tess.set_password(PASSWORDS["tess"])
tess.save()
RoleBinding.objects.create(subject_type="user", subject="tess", role="operator", kind="topic",
                           pattern="team-a.*")
RoleBinding.objects.create(subject_type="user", subject="tess", role="viewer", kind="cluster")
"""


class ConsoleServer:
    """``manage.py runserver`` on a fresh data directory, with the Kafka listener on."""

    def __init__(self, data_dir: Path, **env: str):
        self.kafka_port, self.http_port = free_port(), free_port()
        self.env = {
            **os.environ,
            "TIDELOG_DATA_DIR": str(data_dir),
            "TIDELOG_DEMO": "0",
            "TIDELOG_KAFKA_LISTENER": "1",
            "TIDELOG_KAFKA_PORT": str(self.kafka_port),
            "TIDELOG_HTTP_PORT": str(self.http_port),
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        for name in ("DATABASE_URL", "REDIS_URL", "TIDELOG_CLUSTER"):
            self.env.pop(name, None)
        self.log_path = data_dir.parent / f"server-{self.kafka_port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def shell(self, code: str) -> str:
        return self.manage("shell", "--no-imports", "-c", f"PASSWORDS = {PASSWORDS!r}\n{code}")

    def audit_entries(self) -> list[dict]:
        out = self.shell(
            "import json\n"
            "from brokerui.audit.models import AuditEntry\n"
            "rows = AuditEntry.objects.order_by('id').values("
            "'username', 'user__username', 'action', 'target', 'before', 'after', 'source')\n"
            "print(json.dumps(list(rows)))"
        )
        return json.loads(out.strip().splitlines()[-1])

    def log(self) -> str:
        return self.log_path.read_text()

    def start(self) -> ConsoleServer:
        self.manage("migrate", "--noinput")
        self.shell(SETUP)
        with open(self.log_path, "wb") as log_file:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "runserver",
                    "--noreload",
                    "--nostatic",
                    f"127.0.0.1:{self.http_port}",
                ],
                cwd=REPO_DIR,
                env=self.env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while "tidelog: Kafka protocol on" not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the server did not start:\n{self.log()}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory, tls_files):
    cert, key = tls_files
    server = ConsoleServer(
        tmp_path_factory.mktemp("secured") / "data",
        TIDELOG_KAFKA_SASL="1",
        TIDELOG_KAFKA_TLS_CERT=str(cert),
        TIDELOG_KAFKA_TLS_KEY=str(key),
        TIDELOG_KAFKA_SUPER_USERS="User:sam",
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    server = ConsoleServer(tmp_path_factory.mktemp("open") / "data").start()
    yield server
    server.stop()


def _rdkafka(server, tls_files, mechanism: str, user: str, password: str | None = None) -> dict:
    return {
        "bootstrap.servers": server.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tls_files[0]),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": PASSWORDS[user] if password is None else password,
    }


def _kafka_python(server, tls_files, mechanism: str, user: str) -> dict:
    return {
        "bootstrap_servers": server.bootstrap,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(tls_files[0]),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user],
    }


def _produce(config: dict, topic: str, values: list[bytes]) -> list:
    producer = Producer({"linger.ms": 5, "message.timeout.ms": 20000, **config})
    errors = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(DEADLINE_S)
    return errors


def _first_error(config: dict) -> KafkaError | None:
    """The first error librdkafka reports while fetching metadata (None: it signed in)."""
    seen: list[KafkaError] = []
    # one connection attempt per call: each failed sign-in counts in the login throttle
    once = {"reconnect.backoff.ms": 60000, "reconnect.backoff.max.ms": 60000}
    admin = AdminClient({**config, **once, "error_cb": seen.append})
    deadline = time.monotonic() + DEADLINE_S
    while not seen and time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=1)
            return None
        except KafkaException:
            admin.poll(0.1)  # serves the error callback
    assert seen, "neither signed in nor refused"
    return seen[0]


def test_the_start_up_line_names_the_mode(secured, open_server):
    assert (
        f"tidelog: Kafka protocol on 127.0.0.1:{secured.kafka_port}: SASL_SSL (SASL PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512 with the console's users and roles, TLS)"
    ) in secured.log()
    assert (
        f"tidelog: Kafka protocol on 127.0.0.1:{open_server.kafka_port}: PLAINTEXT (plaintext, "
        "open: no authentication"
    ) in open_server.log()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_console_users_sign_in_with_their_roles(secured, tls_files, mechanism):
    topic = f"payments-{mechanism.lower()}"
    values = [b"payment %d" % i for i in range(5)]
    operator = _rdkafka(secured, tls_files, mechanism, "olivia")
    assert _produce(operator, topic, values) == [None] * 5

    viewer = _rdkafka(secured, tls_files, mechanism, "victor")
    refused = _produce(viewer, topic, [b"forged"])
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    consumer = KafkaConsumer(
        topic,
        group_id=f"audit-{mechanism.lower()}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=DEADLINE_S * 1000,
        **_kafka_python(secured, tls_files, mechanism, "victor"),
    )
    got = [r.value for _, r in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert got == values

    nobody = Consumer({"group.id": "spies", **_rdkafka(secured, tls_files, mechanism, "nora")})
    nobody.assign([TopicPartition(topic, 0, 0)])
    deadline, msg = time.monotonic() + DEADLINE_S, None
    while msg is None and time.monotonic() < deadline:
        msg = nobody.poll(0.5)
    nobody.close()
    assert msg is not None and msg.error() is not None
    assert msg.error().code() in (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    )

    wrong = _first_error(_rdkafka(secured, tls_files, mechanism, "olivia", "guess"))
    assert wrong is not None and wrong.code() == KafkaError._AUTHENTICATION


def test_role_bindings_by_topic_prefix_on_the_kafka_port(secured, tls_files):
    """The console's bindings, as the Kafka port grants them: tess is operator of team-a.* and
    viewer elsewhere, so she produces to team-a.orders, is refused (Kafka's
    TOPIC_AUTHORIZATION_FAILED) on payments, and reads both."""
    operator = _rdkafka(secured, tls_files, "SCRAM-SHA-256", "olivia")
    assert _produce(operator, "payments-bound", [b"p0"]) == [None]

    tess = _rdkafka(secured, tls_files, "SCRAM-SHA-256", "tess")
    assert _produce(tess, "team-a.orders", [b"a0", b"a1"]) == [None, None]
    refused = _produce(tess, "payments-bound", [b"forged"])
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    admin = AdminClient(tess)
    created = admin.create_topics([NewTopic("team-a.refunds", 1)])
    assert created["team-a.refunds"].result(DEADLINE_S) is None
    with pytest.raises(KafkaException) as caught:
        admin.create_topics([NewTopic("team-b.refunds", 1)])["team-b.refunds"].result(DEADLINE_S)
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    got = {}
    for topic in ("team-a.orders", "payments-bound"):
        consumer = KafkaConsumer(
            topic,
            group_id=f"tess-{topic}",
            auto_offset_reset="earliest",
            consumer_timeout_ms=DEADLINE_S * 1000,
            **_kafka_python(secured, tls_files, "SCRAM-SHA-256", "tess"),
        )
        got[topic] = [r.value for r in consumer][: 2 if topic == "team-a.orders" else 1]
        consumer.close()
    assert got == {"team-a.orders": [b"a0", b"a1"], "payments-bound": [b"p0"]}
    assert "role viewer on TOPIC payments-bound, needs operator" in secured.log()


def test_kafka_python_operator_produces_with_scram(secured, tls_files):
    producer = KafkaProducer(**_kafka_python(secured, tls_files, "SCRAM-SHA-512", "olivia"))
    producer.send("kafka-python-writes", b"hello").get(timeout=DEADLINE_S)
    producer.close()
    consumer = Consumer(
        {
            "group.id": "reader",
            "auto.offset.reset": "earliest",
            **_rdkafka(secured, tls_files, "SCRAM-SHA-256", "victor"),
        }
    )
    consumer.subscribe(["kafka-python-writes"])
    deadline, msg = time.monotonic() + DEADLINE_S, None
    while msg is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
    consumer.close()
    assert msg is not None and msg.error() is None and msg.value() == b"hello"


def test_scram_credentials_follow_the_password(secured, tls_files):
    # carol was made by create_user(password=...): no SCRAM credential until she signs in once
    scram = _rdkafka(secured, tls_files, "SCRAM-SHA-256", "carol")
    assert _first_error(scram).code() == KafkaError._AUTHENTICATION
    assert _first_error(_rdkafka(secured, tls_files, "PLAIN", "carol")) is None
    assert _first_error(scram) is None

    # a new password replaces walter's credentials: the old one stops working
    old = _rdkafka(secured, tls_files, "SCRAM-SHA-512", "walter")
    assert _first_error(old) is None
    secured.shell(
        "from django.contrib.auth.models import User\n"
        "u = User.objects.get(username='walter')\n"
        "u.set_password('second-pass-456')\n"
        "u.save()"
    )
    assert _first_error(old).code() == KafkaError._AUTHENTICATION
    new = _rdkafka(secured, tls_files, "SCRAM-SHA-512", "walter", "second-pass-456")
    assert _first_error(new) is None


def test_an_operators_admin_changes_are_audited_under_their_name(secured, tls_files):
    admin = AdminClient(
        {"client.id": "ops-admin", **_rdkafka(secured, tls_files, "SCRAM-SHA-256", "olivia")}
    )
    admin.create_topics([NewTopic("audited-sasl", 2)])["audited-sasl"].result(DEADLINE_S)
    entries = [e for e in secured.audit_entries() if e["target"] == "topic audited-sasl"]
    assert len(entries) == 1
    entry = entries[0]
    assert re.fullmatch(r"olivia \(ops-admin@127\.0\.0\.1:\d+\)", entry["username"])
    assert entry["user__username"] == "olivia"
    assert (entry["action"], entry["source"]) == ("topic.create", "kafka")
    assert entry["after"] == {"partitions": 2, "config": {}}


def test_acls_on_the_consoles_port_with_a_super_user_and_the_audit_log(secured, tls_files):
    """An operator's DENY refuses even an operator; the super user (TIDELOG_KAFKA_SUPER_USERS,
    no console role) passes it; the ACL and the refusal are on the console's audit log."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    operator = _rdkafka(secured, tls_files, "SCRAM-SHA-256", "olivia")
    assert _produce(operator, "acl-locked", [b"before"]) == [None]
    deny = AclBinding(
        ResourceType.TOPIC, "acl-locked", ResourcePatternType.LITERAL, "User:*", "*",
        AclOperation.WRITE, AclPermissionType.DENY,
    )  # fmt: skip
    admin = AdminClient(operator)
    for future in admin.create_acls([deny]).values():
        future.result(DEADLINE_S)
    refused = _produce(operator, "acl-locked", [b"after"])
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _produce(_rdkafka(secured, tls_files, "SCRAM-SHA-512", "sam"), "acl-locked",
                    [b"super"]) == [None]  # fmt: skip
    entries = [(e["action"], e["target"], e["user__username"]) for e in secured.audit_entries()]
    assert ("acl.create", "acl topic acl-locked", "olivia") in entries
    assert ("acl.denied", "topic acl-locked", "olivia") in entries


def test_admin_changes_on_an_open_port_are_audited_with_client_id_and_address(open_server):
    admin = AdminClient({"bootstrap.servers": open_server.bootstrap, "client.id": "ops-admin"})
    admin.create_topics([NewTopic("audited", 1)])["audited"].result(DEADLINE_S)
    admin.delete_topics(["audited"])["audited"].result(DEADLINE_S)
    entries = [e for e in open_server.audit_entries() if e["target"] == "topic audited"]
    assert [(e["action"], e["source"]) for e in entries] == [
        ("topic.create", "kafka"),
        ("topic.delete", "kafka"),
    ]
    for entry in entries:
        assert re.fullmatch(r"ops-admin@127\.0\.0\.1:\d+", entry["username"]), entry
        assert entry["user__username"] is None
    assert entries[1]["before"]["partitions"] == 1

    # and in the __audit topic, as the console's changes are
    consumer = Consumer(
        {
            "bootstrap.servers": open_server.bootstrap,
            "group.id": "audit-reader",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["__audit"])
    payloads, deadline = [], time.monotonic() + DEADLINE_S
    while len(payloads) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            payloads.append(json.loads(msg.value()))
    consumer.close()
    assert [(p["action"], p["source"]) for p in payloads] == [
        ("topic.create", "kafka"),
        ("topic.delete", "kafka"),
    ]
    assert payloads[0]["user"] == entries[0]["username"]
