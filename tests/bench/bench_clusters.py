"""Benchmark `clusters`: the console's page loads on the built-in broker and on a secured
external cluster of the same shape, and the cost of ACL checks on a scan (issue 26, item 8).

Run: ``make bench BENCH=clusters`` or ``python -m tests.bench clusters``. ``BENCH_SCALE``
(default 1.0 = 500 topics of 10 partitions, 5,000 partitions) scales the topic count.

Pages: the overview, a topic's page and a 50-record message page (newest first), each requested
through Django's test client (every middleware, the view, the template: the server's time),
``REPS`` times, on the built-in broker (``/``) and on Tidelog's listener in a process of its own
requiring SCRAM-SHA-512 over TLS (a certificate made here), the console's second cluster
(``/c/secured/``) — interleaved, request by request. p50 and p99 in ms; target p99 <= 300 ms on
both. The ratio column compares the secured cluster with the built-in broker (> 1: the built-in
broker is faster), the same console on both.

ACL checks: a confluent-kafka consumer reading 10,000 records through the Kafka port as a SASL
user (an in-process listener with SCRAM), with 100 ACL bindings that match nothing of the read
(and one that allows it), against the same with no ACLs; interleaved runs, medians; target
<= 10 % slower. The same scan by a user whose roles are console role bindings by topic prefix
(100 of them, one matching: brokerui.access's BindingGrants on the port), against a cluster-wide
viewer. Masking: a 10,000-record export with one masked field by a masked user, against the
same export by one with the unmask permission, in the request thread's CPU time (the
broker's threads in the same process make wall times swing by half).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

from tests.bench.common import (  # noqa: E402
    Row,
    at_most,
    log,
    median,
    percentile,
    print_table,
    scaled,
    temp_dir,
    write_results,
)

NAME = "clusters"
PARTITIONS = 10
REPS = 40
TARGET_MS = 300
SCAN_RECORDS = 10_000
SCAN_RUNS = 5
EXPORT_RUNS = 9


def _names(topics: int) -> list[str]:
    return [f"team-{i // 50:02d}.events-{i:04d}" for i in range(topics)]


def _value(i: int) -> bytes:
    return json.dumps({"order": i, "customer": f"c{i % 97}", "total": i % 500 + 0.5}).encode()


def _fill_secured(server, topics: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(server.client_config)
    names = _names(topics)
    for start in range(0, len(names), 50):
        batch = [NewTopic(n, PARTITIONS, 1) for n in names[start : start + 50]]
        for future in admin.create_topics(batch, request_timeout=60).values():
            future.result(60)
    admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(60)
    producer = Producer({**server.client_config, "linger.ms": 20})
    for i in range(3000):
        producer.produce("orders", _value(i), key=b"c%d" % (i % 97), partition=i % 3)
    assert producer.flush(60) == 0


def _fill_builtin(store, topics: int) -> None:
    from streams.log import ProducerRecord

    for name in _names(topics):
        store.create_topic(name, PARTITIONS)
    store.create_topic("orders", 3)
    for p in range(3):
        records = [ProducerRecord(_value(i), b"c%d" % (i % 97), (), None)
                   for i in range(p, 3000, 3)]  # fmt: skip
        store.append_batch("orders", records, partition=p)


def _pages(work: str, topics: int) -> dict[tuple[str, str], list[float]]:
    os.environ["TIDELOG_DATA_DIR"] = os.path.join(work, "console")
    os.environ["TIDELOG_DEMO"] = "0"
    os.environ["TIDELOG_KAFKA_LISTENER"] = "0"
    os.environ["TIDELOG_REGISTRY"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brokerui.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from brokerui.broker import close_broker, get_broker
    from brokerui.cluster import close_external_clusters
    from brokerui.config import BUILTIN, ClusterEntry
    from tests.secured_cluster import SecuredListener

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("bench", password="x")
    started = time.perf_counter()
    _fill_builtin(get_broker().store, topics)
    log(f"built-in: {topics} topics x {PARTITIONS} partitions in "
        f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    out: dict[tuple[str, str], list[float]] = {}
    with SecuredListener(Path(work) / "secured") as server:
        started = time.perf_counter()
        _fill_secured(server, topics)
        log(f"secured: {topics} topics x {PARTITIONS} partitions in "
            f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        settings.TIDELOG_CLUSTERS = (
            ClusterEntry(BUILTIN),
            ClusterEntry("secured", server.url, server.client_properties),
        )
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the test client's
        client = Client()
        client.force_login(User.objects.get(username="bench"))
        pages = {
            "overview": "",
            "topic page": "topics/orders/",
            "50-record message page": "topics/orders/messages/?seek=newest&page_size=50",
        }
        prefixes = {"built-in broker": "/", "SASL_SSL cluster": "/c/secured/"}
        for i in range(REPS + 2):  # the first two warm connections and caches
            for page, path in pages.items():
                for where, prefix in prefixes.items():
                    t0 = time.perf_counter()
                    response = client.get(prefix + path)
                    elapsed = (time.perf_counter() - t0) * 1000
                    assert response.status_code == 200, (prefix + path, response.status_code)
                    if i >= 2:
                        out.setdefault((page, where), []).append(elapsed)
        close_external_clusters()
    out.update(_masked_export(get_broker().store))
    close_broker()
    return out


def _masked_export(store) -> dict[tuple[str, str], list[float]]:
    """A 10,000-record export (JSON Lines, the console's download) of a topic with one masked
    field, by a user who sees it masked and by one with the unmask permission; interleaved."""
    from django.contrib.auth.models import User
    from django.test import Client

    from brokerui.access.models import MaskRule
    from streams.log import ProducerRecord

    store.create_topic("cards", 1)
    for start in range(0, SCAN_RECORDS, 1000):
        batch = [
            ProducerRecord(json.dumps({"card": {"number": f"4111{i:012d}"}, "n": i}).encode())
            for i in range(start, start + 1000)
        ]
        store.append_batch("cards", batch, partition=0)
    MaskRule.objects.create(topic="cards", path="value.card.number", action="mask")
    clients = {"clear": Client(), "masked": Client()}
    clients["clear"].force_login(User.objects.get(username="bench"))  # a superuser: unmask
    clients["masked"].force_login(User.objects.create_user("masked"))
    url = "/topics/cards/export/?seek=oldest&format=jsonl"
    times: dict[tuple[str, str], list[float]] = {("export", k): [] for k in clients}
    for run in range(EXPORT_RUNS + 1):
        for kind in ("clear", "masked") if run % 2 == 0 else ("masked", "clear"):
            gc.collect()  # neither run pays for the other's garbage
            t0 = time.thread_time()  # the request's own CPU: the hub's and listener's threads
            body = b"".join(clients[kind].get(url).streaming_content)  # share these 2 cores
            elapsed = time.thread_time() - t0
            assert body.count(b"\n") >= SCAN_RECORDS, body[:200]
            assert (b"4111000000000001" in body) == (kind == "clear")
            if run:
                times[("export", kind)].append(elapsed)
    return times


def _scan_once(bootstrap: str, topic: str) -> float:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from tests.protocol.sasl_users import PASSWORDS

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "victor",
            "sasl.password": PASSWORDS["victor"],
            "group.id": "bench-scan",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        started, seen = time.perf_counter(), 0
        while True:
            for m in consumer.consume(1000, 0.05):  # short: EOF alone never waits a batch out
                if m.error() is None:
                    seen += 1
                elif m.error().code() == KafkaError._PARTITION_EOF and seen >= SCAN_RECORDS:
                    return time.perf_counter() - started
                elif m.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(m.error().str())
    finally:
        consumer.close()


class _ScopedUsers:
    """The SASL users, victor bound as the console binds (brokerui.access): viewer of the
    topics "sc*", of 99 prefixes that match nothing of the read and of its consumer's group,
    through the same
    `BindingGrants` the console's Kafka port uses."""

    def __init__(self):
        from brokerui.access.grants import GROUP, TOPIC, Binding, BindingGrants
        from streams.protocol.security import Role
        from tests.protocol.sasl_users import Users

        self.users = Users()
        bindings = [Binding(Role.VIEWER, "*", TOPIC, f"other-{i}.*") for i in range(99)]
        bindings.append(Binding(Role.VIEWER, "*", TOPIC, "sc*"))
        bindings.append(Binding(Role.VIEWER, "*", GROUP, "bench-scan"))  # its consumer's group
        self.victor = BindingGrants.of("local", bindings)

    def __getattr__(self, name):
        return getattr(self.users, name)

    def role(self, user):
        from streams.protocol.security import Role

        return Role.NONE if user == "victor" else self.users.role(user)

    def grants(self, user):
        return self.victor if user == "victor" else None


def _acl_scan(work: str) -> dict[str, list[float]]:
    from streams.broker.runtime import Broker
    from streams.log import ProducerRecord
    from streams.protocol import ListenerConfig
    from streams.protocol.security import ScopedAuthenticator
    from tests.protocol.sasl_users import Users

    def open_(path: str, users=None) -> Broker:
        listener = ListenerConfig(port=0, authenticator=users or Users())
        return Broker.open(path, kafka_listener=listener)

    scoped = _ScopedUsers()
    assert isinstance(scoped, ScopedAuthenticator)
    plain, with_acls = open_(os.path.join(work, "no-acls")), open_(os.path.join(work, "acls"))
    bound = open_(os.path.join(work, "bindings"), scoped)
    try:
        for broker in (plain, with_acls, bound):
            broker.store.create_topic("scan", 1)
            for start in range(0, SCAN_RECORDS, 1000):
                broker.store.append_batch(
                    "scan", [ProducerRecord(_value(i), None, (), None)
                             for i in range(start, start + 1000)], partition=0,
                )  # fmt: skip
        # 100 bindings made as an operator would (CreateAcls), none denying the read
        from confluent_kafka.admin import AclBinding as Binding
        from confluent_kafka.admin import (
            AclOperation,
            AclPermissionType,
            AdminClient,
            ResourcePatternType,
        )
        from confluent_kafka.admin import ResourceType as Type

        from tests.protocol.sasl_users import PASSWORDS

        admin = AdminClient({
            "bootstrap.servers": "{}:{}".format(*with_acls.kafka_address),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "olivia", "sasl.password": PASSWORDS["olivia"],
        })  # fmt: skip
        bindings = [
            Binding(Type.TOPIC, f"other-{i}", ResourcePatternType.LITERAL, f"User:u{i}", "*",
                    AclOperation.READ, AclPermissionType.ALLOW)
            for i in range(99)
        ] + [Binding(Type.TOPIC, "sc", ResourcePatternType.PREFIXED, "User:victor", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)]  # fmt: skip
        for future in admin.create_acls(bindings).values():
            future.result(30)
        addresses = {
            "none": "{}:{}".format(*plain.kafka_address),
            "acls": "{}:{}".format(*with_acls.kafka_address),
            "bindings": "{}:{}".format(*bound.kafka_address),
        }
        times: dict[str, list[float]] = {kind: [] for kind in addresses}
        kinds = list(addresses)
        for run in range(SCAN_RUNS + 1):
            for kind in kinds if run % 2 == 0 else kinds[::-1]:
                elapsed = _scan_once(addresses[kind], "scan")
                if run:
                    times[kind].append(elapsed)
        return times
    finally:
        plain.close()
        with_acls.close()
        bound.close()


def main() -> list[Row]:
    topics = scaled(500, minimum=20)
    log(f"{topics} topics of {PARTITIONS} partitions ({topics * PARTITIONS:,} partitions)")
    with temp_dir("bench-clusters-") as work:
        scans = _acl_scan(work)
        pages = _pages(work, topics)
    rows = []
    note = (
        f"{topics} topics x {PARTITIONS} partitions + orders (3,000 records) on each; Django test "
        f"client through every middleware, {REPS} requests each, interleaved; SASL_SSL = "
        f"Tidelog's listener in its own process, SCRAM-SHA-512 over TLS (the console's second "
        f"cluster, /c/secured/); ratio > 1: the built-in broker is faster"
    )
    for page in ("overview", "topic page", "50-record message page"):
        local, remote = pages[(page, "built-in broker")], pages[(page, "SASL_SSL cluster")]
        for p in (50, 99):
            check = at_most(TARGET_MS) if p == 99 else None
            target = f"p99 <= {TARGET_MS} ms on both" if p == 99 else None
            rows.append(Row(
                f"{page} p{p}, built-in broker", "ms", percentile(local, p),
                peer="same page, SASL_SSL cluster", peer_value=percentile(remote, p),
                higher_is_better=False, target=target, check=check, note=note,
            ))  # fmt: skip
            rows.append(Row(
                f"{page} p{p}, SASL_SSL cluster", "ms", percentile(remote, p),
                peer="same page, built-in broker", peer_value=percentile(local, p),
                higher_is_better=False, target=target, check=check, note=note,
            ))  # fmt: skip
    scan_none, scan_acls = median(scans["none"]), median(scans["acls"])
    scan_bound = median(scans["bindings"])
    rows.append(
        Row(
            f"{SCAN_RECORDS:,}-record scan as a SASL user, 100 ACL bindings",
            "records/s",
            SCAN_RECORDS / scan_acls,
            peer="the same scan, no ACLs",
            peer_value=SCAN_RECORDS / scan_none,
            target="<= 10 % slower (ratio >= 0.9)",
            check=lambda row: (row.ratio or 0) >= 0.9,
            note=f"confluent-kafka consumer, SCRAM-SHA-256, fetch.wait.max.ms=10 on both; "
            f"median of {SCAN_RUNS} interleaved runs",
        )
    )
    rows.append(
        Row(
            f"{SCAN_RECORDS:,}-record scan as a SASL user, 100 role bindings by topic prefix",
            "records/s",
            SCAN_RECORDS / scan_bound,
            peer="the same scan, no bindings (a cluster-wide viewer)",
            peer_value=SCAN_RECORDS / scan_none,
            target="<= 10 % slower (ratio >= 0.9)",
            check=lambda row: (row.ratio or 0) >= 0.9,
            note=f"the console's BindingGrants on the Kafka port (brokerui.access); "
            f"median of {SCAN_RUNS} interleaved runs",
        )
    )
    clear, masked = median(pages[("export", "clear")]), median(pages[("export", "masked")])
    rows.append(
        Row(
            f"{SCAN_RECORDS:,}-record export (JSON Lines), one masked field",
            "records/s",
            SCAN_RECORDS / masked,
            peer="the same export, unmasked (the unmask permission)",
            peer_value=SCAN_RECORDS / clear,
            target="<= 10 % slower (ratio >= 0.9)",
            check=lambda row: (row.ratio or 0) >= 0.9,
            note=f"the console's export view through Django's test client, the request "
            f"thread's CPU time (time.thread_time); median of {EXPORT_RUNS} interleaved runs",
        )
    )
    print_table(rows)
    write_results(NAME, rows)
    return rows


if __name__ == "__main__":
    main()
