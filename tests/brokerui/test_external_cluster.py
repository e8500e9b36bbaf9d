"""The console on an external Kafka-protocol cluster (TIDELOG_CLUSTER=kafka://...): Tidelog's
listener runs in another process, the console reaches it through KafkaCluster only and never
opens a local broker. Topic list/create/detail, produce and browse, group list/detail with lag,
reset preview and apply once the members left. Each test runs twice: on a plaintext listener,
and on one that requires SASL/SCRAM-SHA-512 over TLS (tests/secured_cluster.py), reached through
a client properties file (TIDELOG_CLUSTER_CONFIG)."""

from __future__ import annotations

import html as htmllib
import re
import time

import pytest
from confluent_kafka import Consumer
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from streams.cluster import ProduceRequest
from streams.groups import ResetScope, ResetStrategy
from tests.secured_cluster import plain_or_secured

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(scope="module", params=["plaintext", "sasl_ssl"])
def server(request, tmp_path_factory):
    """Tidelog's Kafka listener in a process of its own: plaintext, or SASL_SSL."""
    yield from plain_or_secured(request.param, tmp_path_factory)


@pytest.fixture
def name(request) -> str:
    return f"ui-{request.node.originalname[5:40].replace('_', '-')}-{time.time_ns() % 10**9}"


def page(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_topic_list_create_and_detail(operator_client, external, name):
    form = {"name": name, "partitions": "2", "cleanup_policy": "delete",
            "retention_ms": "3600000", "retention_bytes": "-1"}  # fmt: skip
    response = operator_client.post(reverse("console:topic_create"), form)
    assert response.status_code == 302 and response.url == reverse("console:topic", args=[name])
    assert external.describe_topic(name).config["retention.ms"] == "3600000"
    assert AuditEntry.objects.get(action="topic.create").target == f"topic {name}"

    external.produce(topic=name, records=[ProduceRequest(b"x", partition=1)] * 3)
    listing = page(operator_client.get(reverse("console:topics")))
    assert name in listing and "not known on an external cluster" in listing  # last write
    detail = page(operator_client.get(reverse("console:topic", args=[name])))
    rows = re.findall(r'data-partition="(\d+)" data-end-offset="(\d+)" data-start-offset="(\d+)"',
                      detail)  # fmt: skip
    assert rows == [("0", "0", "0"), ("1", "3", "0")]
    assert "on disk: not available on an external cluster" in detail  # no segment files here
    assert 'id="live-external"' in detail  # nor live metrics


def test_a_large_clusters_lists_say_their_figures_are_a_snapshot(
    operator_client, settings, server, monkeypatch, name
):
    """On a cluster of more than LISTING_SNAPSHOT_ABOVE partitions (here: any), the overview
    and the topic list read a snapshot of offsets and configs and say as of when."""
    import streams.cluster.kafka as kafka
    from brokerui import cluster

    monkeypatch.setattr(kafka, "LISTING_SNAPSHOT_ABOVE", 0)
    settings.TIDELOG_CLUSTER = server.url
    settings.TIDELOG_CLUSTER_CONFIG = getattr(server, "client_properties", None)
    try:
        big = cluster.get_cluster()
        big.create_topic(name=name, partitions=2)
        big.produce(topic=name, records=[ProduceRequest(b"x", partition=0)] * 5)
        listing = page(operator_client.get(reverse("console:topics"), {"q": name}))
        assert 'id="listing-snapshot"' in listing and "(a snapshot)" in listing
        row = re.search(rf"{name}</a>.*?</tr>", listing, re.S).group(0)
        assert ">5</td>" in row  # the new topic's records: asked at once, not from before it
        overview = page(operator_client.get(reverse("console:home")))
        assert "topic figures as of" in overview and 'id="listing-snapshot"' in overview
    finally:
        cluster.close_external_clusters()
    monkeypatch.setattr(kafka, "LISTING_SNAPSHOT_ABOVE", 10**9)  # a small cluster again
    try:
        small = page(operator_client.get(reverse("console:topics"), {"q": name}))
        assert name in small and 'id="listing-snapshot"' not in small  # asked on each page
    finally:
        cluster.close_external_clusters()


def test_produce_then_browse(operator_client, external, name):
    external.create_topic(name=name, partitions=1)
    response = operator_client.post(
        reverse("console:produce", args=[name]),
        {"topic": name, "encoding": "text", "count": "1", "key": "k-ui", "value": "hello-ui"},
    )
    assert "Wrote 1 message to" in page(response)
    assert [r.value for r in external.read(topic=name, partition=0, offset=0)] == [b"hello-ui"]

    browse = page(operator_client.get(reverse("console:messages", args=[name]), {"seek": "oldest"}))
    assert "k-ui" in browse and "hello-ui" in browse


def test_filter_export_and_import_through_the_external_cluster(operator_client, external, name):
    import json

    from django.core.files.uploadedfile import SimpleUploadedFile

    external.create_topic(name=name, partitions=2)
    external.produce(
        topic=name,
        records=[
            ProduceRequest(
                json.dumps({"n": i}).encode(),
                key=b"k%d" % i,
                headers=(("h", b"\xff" if i == 3 else b"v"),),
                partition=i % 2,
                timestamp_ms=1_767_225_600_000 + i,
            )
            for i in range(6)
        ],
    )
    url = reverse("console:messages", args=[name])
    last = shown = page(operator_client.get(url, {"seek": "oldest", "q": "value.n >= 3"}))
    for _ in range(20):  # a remote fetch may take longer than a page's time budget
        more = re.search(r'class="secondary continue" href="([^"]+)"', last)
        if not more:
            break
        last = page(operator_client.get(url + htmllib.unescape(more[1])))
        shown += last
    keys = re.findall(r'<td class="key"><code>([^<]*)</code>', shown)  # not "k2" in a token
    assert sorted(keys) == ["k3", "k4", "k5"]

    export = operator_client.get(
        reverse("console:messages_export", args=[name]), {"seek": "oldest", "q": "value.n >= 3"}
    )
    lines = b"".join(export.streaming_content).splitlines(keepends=True)
    assert [json.loads(x)["key"] for x in lines[1:-1]] == ["k3", "k4", "k5"]

    copy = name + "-copy"
    external.create_topic(name=copy, partitions=2)
    imports = reverse("console:messages_import", args=[copy])
    preview = page(
        operator_client.post(
            imports,
            {"file": SimpleUploadedFile("x.jsonl", b"".join(lines)), "keep_partitions": "1"},
        )
    )
    token = re.search(r'name="token" value="([0-9a-f]+)"', preview)[1]
    done = page(operator_client.post(imports, {"token": token, "action": "confirm"}))
    assert 'data-imported="3"' in done
    again = operator_client.get(reverse("console:messages_export", args=[copy]), {"seek": "oldest"})
    copied = b"".join(again.streaming_content).splitlines(keepends=True)

    def without_offset(line: bytes) -> dict:
        return {k: v for k, v in json.loads(line).items() if k != "offset"}

    # keys, values, headers (a byte that is not UTF-8 among them), timestamps and partitions
    assert [without_offset(x) for x in copied[1:-1]] == [without_offset(x) for x in lines[1:-1]]


def test_groups_lag_and_reset_after_members_left(operator_client, external, server, name):
    group = f"g-{name}"
    external.create_topic(name=name, partitions=2)
    external.produce(topic=name, records=[ProduceRequest(b"v%d" % i, partition=i % 2)
                                          for i in range(6)])  # fmt: skip
    consumer = _member(server, group, name, 6)
    try:
        external.produce(topic=name, records=[ProduceRequest(b"late", partition=0)])
        listing = page(operator_client.get(reverse("console:groups")))
        assert reverse("console:group", args=[group]) in listing
        detail = page(operator_client.get(reverse("console:group", args=[group])))
        assert name in detail and re.search(r"\b1\b", detail)  # one record behind
        preview = _preview(operator_client, group)
        assert _plan_rows(preview) == {(name, 0): 0, (name, 1): 0}
        refused = page(_apply(operator_client, group, preview))
        assert 'id="reset-refused"' in refused and "Nothing was changed" in refused
    finally:
        consumer.close()

    _wait(lambda: external.describe_group(group).description.state == "Empty")
    applied = page(_apply(operator_client, group, _preview(operator_client, group)))
    assert 'id="reset-applied"' in applied
    lag = {p.partition: (p.committed, p.lag) for p in external.describe_group(group).lag.partitions}
    assert lag == {0: (0, 4), 1: (0, 3)}
    assert AuditEntry.objects.filter(action="group.reset").count() == 1


def _member(server, group: str, topic: str, n: int) -> Consumer:
    consumer = Consumer({
        **getattr(server, "client_config", {}),
        "bootstrap.servers": server.bootstrap, "group.id": group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": 6000, "max.poll.interval.ms": 6000,
    })  # fmt: skip
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 60
    while seen < n:
        assert time.monotonic() < deadline, f"the group read {seen} of {n} records"
        m = consumer.poll(0.5)
        seen += m is not None and m.error() is None
    consumer.commit(asynchronous=False)
    return consumer


def _preview(client, group: str) -> str:
    data = {"action": "preview", "scope": "all", "strategy": "to-earliest"}
    return page(client.post(reverse("console:group_reset", args=[group]), data, **HX))


def _apply(client, group: str, preview: str):
    token = re.search(r'name="plan" value="([^"]+)"', preview)
    assert token, "no plan in the preview"
    data = {"action": "apply", "plan": htmllib.unescape(token.group(1))}
    return client.post(reverse("console:group_reset", args=[group]), data, **HX)


def _plan_rows(html: str) -> dict[tuple[str, int], int]:
    rows = re.findall(
        r'<tr data-topic="([^"]+)" data-partition="(\d+)" data-current="[^"]*" '
        r'data-target="(\d+)"',
        html,
    )
    return {(t, int(p)): int(target) for t, p, target in rows}


def _wait(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_json_api_on_the_external_cluster(operator_client, external, name):
    external.create_topic(name=name, partitions=2)
    external.produce(topic=name, records=[ProduceRequest(b"a", partition=0)] * 2)
    topics = operator_client.get("/api/v1/topics").json()
    assert name in {t["name"] for t in topics["topics"]}
    detail = operator_client.get(f"/api/v1/topics/{name}").json()
    assert [p["end_offset"] for p in detail["partitions"]] == [2, 0]
    records = operator_client.get(f"/api/v1/topics/{name}/records", {"partition": 0}).json()
    assert [r["offset"] for r in records["records"]] == [0, 1]
    group = f"api-{name}"  # a group made by a reset alone (Kafka allows it), then described
    plan = external.plan_reset(group_id=group, strategy=ResetStrategy.parse("to-latest"),
                               scope=ResetScope(topic=name))  # fmt: skip
    external.execute_reset(plan=plan)
    described = operator_client.get(f"/api/v1/groups/{group}").json()
    assert described["state"] == "Empty" and described["total_lag"] == 0
    # OffsetDelete goes through kafka-python's admin client (librdkafka's binding lacks it)
    deleted = operator_client.delete(f"/api/v1/groups/{group}/offsets/{name}")
    assert deleted.status_code == 200, deleted.content
    assert deleted.json()["deleted"] == [{"topic": name, "partition": p} for p in (0, 1)]
    # no offsets and no members left: the cluster no longer knows the group
    assert operator_client.get(f"/api/v1/groups/{group}").status_code == 404
