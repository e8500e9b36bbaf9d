"""``manage.py consumer_groups --bootstrap-server``: the command through a running broker, as
Kafka's kafka-consumer-groups.sh works, while the server owns (and locks) its data directory.

The broker is Tidelog's own (``python -m streams.protocol``) in a process of its own; groups are
made and checked with confluent-kafka's clients, never with the code under test.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from django.core.management import CommandError, call_command

from tests.kafka_servers import TidelogListener

REPO = Path(__file__).resolve().parents[2]
TOPIC, GROUP, SIZES = "orders", "billing", {0: 4, 1: 6}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The broker, running: it holds its data directory's lock for as long as it runs."""
    data = str(tmp_path_factory.mktemp("broker") / "data")
    with TidelogListener(data, extra_args=("--initial-rebalance-delay-ms", "0")) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": s.bootstrap})
        for p, n in SIZES.items():
            for i in range(n):
                producer.produce(TOPIC, value=b"v%d-%d" % (p, i), partition=p)
        assert producer.flush(30) == 0
        yield s


def member(server, group: str, n: int = sum(SIZES.values()), client_id: str = "billing-app"):
    """A real consumer of `group` that read `n` records of orders (from the group's committed
    offsets, else the earliest) and committed; with the first offset it read per partition."""
    c = Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": group, "client.id": client_id,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": 6000, "max.poll.interval.ms": 6000,
    })  # fmt: skip
    c.subscribe([TOPIC])
    first: dict[int, int] = {}
    seen, deadline = 0, time.monotonic() + 60
    while seen < n:
        assert time.monotonic() < deadline, f"the consumer read {seen} of {n} records"
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen += 1
            first.setdefault(m.partition(), m.offset())
    c.commit(asynchronous=False)
    return c, first


def committed(server, group: str) -> dict[int, int]:
    """The group's committed offsets on orders, as a Kafka client fetches them."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p) for p in SIZES])]
    answer = admin.list_consumer_group_offsets(request)[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def run(server, *args: str) -> str:
    out = io.StringIO()
    call_command(
        "consumer_groups", "--bootstrap-server", server.bootstrap, *args,
        stdout=out, stderr=io.StringIO(),
    )  # fmt: skip
    return out.getvalue()


def rows(output: str) -> list[dict[str, str]]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    header = re.split(r"\s{2,}", lines[start].strip())
    out = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        out.append(dict(zip(header, re.split(r"\s{2,}", line.strip()), strict=True)))
    return out


@pytest.fixture
def data_dir_of(settings, server):
    """TIDELOG_DATA_DIR is the running broker's: opening it would fail (it is locked)."""
    settings.TIDELOG_DATA_DIR = server.data_dir


def test_list_describe_and_reset_through_the_running_broker(server, data_dir_of, db):
    from brokerui.audit.models import AuditEntry

    with pytest.raises(CommandError, match="--bootstrap-server"):  # the data dir is the server's
        call_command("consumer_groups", "--list", stdout=io.StringIO())

    consumer, _ = member(server, GROUP)
    try:
        assert GROUP in run(server, "--list").splitlines()
        described = rows(run(server, "--describe", "--group", GROUP))
        assert {(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in described} == {
            ("0", "4", "0"), ("1", "6", "0")
        }  # fmt: skip
        assert {r["CLIENT-ID"] for r in described} == {"billing-app"}
        assert "Stable" in run(server, "--list", "--state")
        # members are active: the plan is shown, --execute is refused and nothing changes
        out = run(server, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest")
        assert "Warning: The group is Stable, not Empty" in out
        with pytest.raises(CommandError, match="Stable") as refused:
            run(server, "--reset-offsets", "--group", GROUP, "--all-topics", "--to-earliest",
                "--execute")  # fmt: skip
        assert "\n" not in str(refused.value)
        assert committed(server, GROUP) == {0: 4, 1: 6}
    finally:
        consumer.close()

    deadline = time.monotonic() + 30
    while "Empty" not in run(server, "--describe", "--group", GROUP, "--state"):
        assert time.monotonic() < deadline, "the group did not become Empty"
        time.sleep(0.2)

    # a dry run (the default) changes nothing
    out = run(server, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--shift-by", "-3")
    assert {(r["PARTITION"], r["NEW-OFFSET"]) for r in rows(out)} == {("0", "1"), ("1", "3")}
    assert committed(server, GROUP) == {0: 4, 1: 6}
    # --execute commits exactly the plan, through the broker
    out = run(server, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--shift-by", "-3",
              "--execute")  # fmt: skip
    assert {(r["PARTITION"], r["NEW-OFFSET"]) for r in rows(out)} == {("0", "1"), ("1", "3")}
    assert committed(server, GROUP) == {0: 1, 1: 3}
    described = rows(run(server, "--describe", "--group", GROUP))
    assert {(r["PARTITION"], r["LAG"]) for r in described} == {("0", "3"), ("1", "3")}
    # and the group's next consumer really resumes there: 3 + 3 records read again
    again, first = member(server, GROUP, n=6)
    again.close()
    assert first == {0: 1, 1: 3}
    entry = AuditEntry.objects.get(action="group.reset", source="cli")
    assert entry.target == f"group {GROUP}" and entry.username.startswith("cli:")
    assert entry.after == {"strategy": "shift-by -3", "offsets": {TOPIC: {"0": 1, "1": 3}}}


def test_delete_and_errors_through_the_running_broker(server, data_dir_of, db):
    member(server, "short-lived")[0].close()
    deadline = time.monotonic() + 30
    while "Empty" not in run(server, "--describe", "--group", "short-lived", "--state"):
        assert time.monotonic() < deadline, "the group did not become Empty"
        time.sleep(0.2)
    # OffsetDelete through the broker (kafka-python's admin client: librdkafka's binding lacks
    # it): refused while a member subscribes to the topic, then done once the group is Empty
    busy = Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": "short-lived",
        "enable.auto.commit": False, "session.timeout.ms": 6000,
    })  # fmt: skip
    busy.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while not busy.assignment():  # a member that subscribes to orders
        assert time.monotonic() < deadline, "the consumer was given no partitions"
        busy.poll(0.2)
    try:
        with pytest.raises(CommandError, match="short-lived") as info:
            run(server, "--delete-offsets", "--group", "short-lived", "--topic", TOPIC)
        assert "\n" not in str(info.value)
        assert committed(server, "short-lived") == {0: 4, 1: 6}
    finally:
        busy.close()
    deadline = time.monotonic() + 30
    while "Empty" not in run(server, "--describe", "--group", "short-lived", "--state"):
        assert time.monotonic() < deadline, "the group did not become Empty again"
        time.sleep(0.2)
    out = run(server, "--delete-offsets", "--group", "short-lived", "--topic", TOPIC)
    assert out.splitlines()[0] == (
        f"Request succeed for deleting offsets with topic {TOPIC} group short-lived"
    )
    assert all(offset < 0 for offset in committed(server, "short-lived").values())  # none
    from brokerui.audit.models import AuditEntry

    entry = AuditEntry.objects.get(action="group.offsets.delete", source="cli")
    assert entry.target == "group short-lived"
    member(server, "short-lived")[0].close()  # offsets again, for the group delete below
    assert "Deletion of requested consumer groups ('short-lived')" in run(
        server, "--delete", "--group", "short-lived"
    )
    assert "short-lived" not in run(server, "--list").splitlines()
    with pytest.raises(CommandError, match="does not exist"):
        run(server, "--describe", "--group", "short-lived")
    with pytest.raises(CommandError, match="is not HOST:PORT"):
        call_command("consumer_groups", "--bootstrap-server", "nowhere", "--list")


def test_from_a_shell_while_the_broker_runs(server, tmp_path):
    env = {**os.environ, "TIDELOG_DATA_DIR": str(tmp_path / "console")}
    args = [sys.executable, "manage.py", "consumer_groups", "--bootstrap-server", server.bootstrap]

    def shell(*more: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*args, *more], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )

    member(server, "from-a-shell")[0].close()
    ok = shell("--list")
    assert ok.returncode == 0 and "from-a-shell" in ok.stdout.splitlines(), ok.stderr
    assert ok.stderr == ""
    bad = shell("--describe", "--group", "nope")
    assert bad.returncode == 1
    assert bad.stderr.strip() == "CommandError: Consumer group 'nope' does not exist."


def test_an_unreachable_broker_is_one_clear_line(settings, tmp_path, db):
    settings.TIDELOG_DATA_DIR = tmp_path / "unused"
    from tests.kafka_servers import free_port

    with pytest.raises(CommandError) as info:
        call_command("consumer_groups", "--bootstrap-server", f"127.0.0.1:{free_port()}",
                     "--list", stdout=io.StringIO())  # fmt: skip
    assert "did not answer" in str(info.value) and "\n" not in str(info.value)
    assert not os.path.exists(settings.TIDELOG_DATA_DIR)  # never opened


def test_a_sasl_listener_through_command_config(tmp_path, settings, db):
    """Kafka's --command-config: the client properties of a listener that requires SASL; the
    broker authorises by role (an operator may reset, a viewer may only look)."""
    from streams.broker.runtime import Broker
    from streams.protocol import ListenerConfig
    from tests.protocol.sasl_users import PASSWORDS, Users

    settings.TIDELOG_DATA_DIR = tmp_path / "unused"
    broker = Broker.open(
        tmp_path / "data", kafka_listener=ListenerConfig(port=0, authenticator=Users())
    )
    try:
        broker.store.create_topic(TOPIC, 1)
        for i in range(3):
            broker.store.append(TOPIC, b"v%d" % i, partition=0)
        broker.coordinator.commit_offsets(GROUP, {(TOPIC, 0): 3})
        host, port = broker.kafka_address

        def config(user: str) -> str:
            path = tmp_path / f"{user}.properties"
            path.write_text(
                "# as for kafka-consumer-groups.sh, with librdkafka's property names\n"
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                f"sasl.username={user}\nsasl.password: {PASSWORDS[user]}\n"
            )
            return str(path)

        def reset(user: str) -> str:
            out = io.StringIO()
            call_command(
                "consumer_groups", "--bootstrap-server", f"{host}:{port}",
                "--command-config", config(user), "--reset-offsets", "--group", GROUP,
                "--topic", TOPIC, "--to-earliest", "--execute", stdout=out,
            )  # fmt: skip
            return out.getvalue()

        def offset() -> int:
            return broker.coordinator.committed(GROUP)[(TOPIC, 0)].offset

        with pytest.raises(CommandError, match="AUTHORIZATION") as refused:
            reset("victor")  # a viewer
        assert "\n" not in str(refused.value) and offset() == 3
        assert {r["NEW-OFFSET"] for r in rows(reset("olivia"))} == {"0"}  # an operator
        assert offset() == 0
    finally:
        broker.close()
    with pytest.raises(CommandError, match="only be used with --bootstrap-server"):
        call_command("consumer_groups", "--command-config", "x", "--list")
    with pytest.raises(CommandError, match="--command-config, line 1.*expected key=value"):
        (tmp_path / "bad.properties").write_text("security.protocol\n")
        call_command("consumer_groups", "--bootstrap-server", "127.0.0.1:9", "--command-config",
                     str(tmp_path / "bad.properties"), "--list")  # fmt: skip
