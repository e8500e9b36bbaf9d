"""Transactions in the console and the API (issue 12, item 6): the open transactions page and
``/api/v1/transactions``, the last stable offset beside the high watermark on the topic page,
and an operator's abort of a hanging transaction (confirmation, audited, viewers refused).

A real open transaction: confluent-kafka's transactional producer against the console broker's
Kafka listener. A read_committed confluent consumer proves the abort really aborted."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from brokerui.audit.models import AuditEntry
from streams.protocol import ListenerConfig

API = "/api/v1"
DEADLINE_S = 20


@pytest.fixture
def bootstrap(broker):
    broker.start_kafka_listener(ListenerConfig(port=0))
    host, port = broker.kafka_address
    broker.store.create_topic("payments", 2)
    return f"{host}:{port}"


@pytest.fixture
def open_txn(bootstrap):
    """A transaction of `pay-1` left open: 3 records in payments-0, 2 in payments-1 (after 4
    plain records in payments-0). Yields the producer (its commit is up to the test)."""
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(4):
        plain.produce("payments", b"plain-%d" % i, partition=0)
    assert plain.flush(DEADLINE_S) == 0
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "pay-1",
            "transaction.timeout.ms": 600_000,
        }
    )
    p.init_transactions(DEADLINE_S)
    p.begin_transaction()
    for i in range(3):
        p.produce("payments", b"txn-%d" % i, partition=0)
    for i in range(2):
        p.produce("payments", b"txn-p1-%d" % i, partition=1)
    assert p.flush(DEADLINE_S) == 0
    yield p


def _client(user) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return c


def _read_committed(bootstrap: str, partition: int) -> list[bytes]:
    """Every value of payments-`partition` a read_committed consumer gets (to the LSO)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{partition}-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition("payments", partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF: at the LSO
                    break
                raise KafkaException(msg.error())
            out.append(msg.value())
    finally:
        c.close()
    return out


def test_page_and_api_list_the_open_transaction(client, operator, open_txn):
    client.force_login(operator)
    page = client.get("/transactions/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-txn="pay-1"' in html and 'data-state="Ongoing"' in html
    assert "payments-0" in html and "payments-1" in html
    assert "10 min" in html  # the timeout, with its unit
    assert "as of" in html
    assert 'href="/transactions/"' in html  # the nav link

    body = _client(operator).get(f"{API}/transactions").json()
    assert body["count"] == 1
    (t,) = body["transactions"]
    assert t["transactional_id"] == "pay-1" and t["state"] == "Ongoing"
    assert t["partitions"] == [
        {"topic": "payments", "partition": 0},
        {"topic": "payments", "partition": 1},
    ]
    assert t["timeout_ms"] == 600_000 and t["age_ms"] >= 0 and not t["hanging"]
    assert t["producer_id"] >= 0 and t["producer_epoch"] >= 0
    assert body["as_of_ms"] > 0 and body["as_of"].endswith("Z")


def test_topic_page_shows_the_lso_beside_the_high_watermark(client, viewer, open_txn):
    client.force_login(viewer)
    html = client.get("/topics/payments/").content.decode()
    assert "Stable offset (LSO)" in html
    # payments-0: 4 plain records, then the open transaction from offset 4: LSO 4, HW 7
    assert 'data-lso="4"' in html and 'data-end-offset="7"' in html
    assert 'data-lso="0"' in html  # payments-1: the transaction holds it at 0
    assert "open txn" in html


def test_operator_aborts_a_hanging_transaction_audited(client, operator, bootstrap, open_txn):
    client.force_login(operator)
    t = _client(operator).get(f"{API}/transactions").json()["transactions"][0]
    confirm = client.get("/transactions/pay-1/abort/")
    assert confirm.status_code == 200 and b"cannot be undone" in confirm.content
    # no tick: nothing happens
    refused = client.post(
        "/transactions/pay-1/abort/",
        {"producer_id": t["producer_id"], "producer_epoch": t["producer_epoch"]},
    )
    assert refused.status_code == 200 and b"tick to confirm" in refused.content
    assert _client(operator).get(f"{API}/transactions").json()["count"] == 1

    done = client.post(
        "/transactions/pay-1/abort/",
        {"producer_id": t["producer_id"], "producer_epoch": t["producer_epoch"], "confirm": "1"},
    )
    assert done.status_code == 302
    assert _client(operator).get(f"{API}/transactions").json()["count"] == 0

    entry = AuditEntry.objects.get(action="transaction.abort")
    assert entry.target == "transactional id pay-1"
    assert entry.before["partitions"] == ["payments-0", "payments-1"]
    assert entry.before["producer_epoch"] == t["producer_epoch"]
    assert entry.after["state"] == "CompleteAbort"
    assert entry.after["producer_epoch"] == t["producer_epoch"] + 1  # the zombie is fenced

    # really aborted: read_committed sees the plain records and nothing of the transaction
    assert _read_committed(bootstrap, 0) == [b"plain-%d" % i for i in range(4)]
    assert _read_committed(bootstrap, 1) == []
    with pytest.raises(KafkaException):  # the producer is fenced: its commit fails
        open_txn.commit_transaction(DEADLINE_S)


def test_api_abort_and_its_refusals(operator, viewer, bootstrap, open_txn):
    op, view = _client(operator), _client(viewer)
    t = op.get(f"{API}/transactions").json()["transactions"][0]
    ids = {"producer_id": t["producer_id"], "producer_epoch": t["producer_epoch"]}

    denied = view.post(f"{API}/transactions/pay-1/abort", ids, format="json")
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "operator_required"
    stale = op.post(
        f"{API}/transactions/pay-1/abort",
        {**ids, "producer_epoch": t["producer_epoch"] + 5},
        format="json",
    )
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "invalid_txn_state"
    unknown = op.post(f"{API}/transactions/nobody/abort", ids, format="json")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "unknown_transactional_id"
    assert op.get(f"{API}/transactions").json()["count"] == 1  # nothing aborted yet
    assert AuditEntry.objects.filter(action="transaction.abort.refused").count() == 1

    ok = op.post(f"{API}/transactions/pay-1/abort", ids, format="json")
    assert ok.status_code == 200, ok.content
    assert ok.json()["state"] == "CompleteAbort"
    assert AuditEntry.objects.get(action="transaction.abort").source == "api"
    assert _read_committed(bootstrap, 0) == [b"plain-%d" % i for i in range(4)]
    again = op.post(f"{API}/transactions/pay-1/abort", ids, format="json")
    assert again.status_code == 409  # nothing left to abort


def test_viewer_cannot_abort_in_the_console(client, viewer, open_txn):
    client.force_login(viewer)
    assert client.get("/transactions/pay-1/abort/").status_code == 403
    assert client.post("/transactions/pay-1/abort/", {"confirm": "1"}).status_code == 403
    page = client.get("/transactions/").content
    assert b'data-txn="pay-1"' in page and b"/transactions/pay-1/abort/" not in page


def test_without_a_listener_no_transactions(client, viewer, broker):
    client.force_login(viewer)
    assert b"No open transactions right now." in client.get("/transactions/").content
    assert _client(viewer).get(f"{API}/transactions").json()["count"] == 0


def test_external_cluster_lso_and_no_transactions(client, viewer, settings, bootstrap, open_txn):
    """On a Kafka-protocol cluster (here Tidelog's own listener, as KafkaCluster sees it): the
    LSO comes from ListOffsets read_committed; transactions are not available, said plainly."""
    from brokerui.cluster import close_external_clusters
    from streams.cluster.kafka import KafkaCluster
    from streams.errors import Unsupported

    cluster = KafkaCluster(bootstrap)
    try:
        assert cluster.stable_offsets(topic="payments") == [4, 0]
        with pytest.raises(Unsupported, match="not available on an external cluster"):
            cluster.list_transactions()
        with pytest.raises(Unsupported, match="not available on an external cluster"):
            cluster.abort_transaction(transactional_id="pay-1", producer_id=0, producer_epoch=0)
    finally:
        cluster.close()

    settings.TIDELOG_CLUSTER = f"kafka://{bootstrap}"
    try:
        client.force_login(viewer)
        page = client.get("/transactions/").content.decode()
        assert "not available on an external cluster" in page
        api = _client(viewer).get(f"{API}/transactions")
        assert api.status_code == 501 and api.json()["error"]["code"] == "unsupported"
        topic = client.get("/topics/payments/").content.decode()
        assert 'data-lso="4"' in topic and 'data-lso="0"' in topic
    finally:
        close_external_clusters()


def _browsed(client, query: str) -> list[str]:
    import re

    page = client.get(f"/topics/payments/messages/?partition=0&seek=oldest&{query}")
    assert page.status_code == 200, page.content[:2000]
    return re.findall(r'<pre class="value[^"]*">([^<]*)</pre>', page.content.decode())


def test_message_browser_reads_everything_or_committed_only(client, viewer, open_txn):
    client.force_login(viewer)
    plain = [f"plain-{i}" for i in range(4)]
    txn = [f"txn-{i}" for i in range(3)]
    assert _browsed(client, "") == plain + txn  # everything, the default
    assert _browsed(client, "read=all") == plain + txn
    assert _browsed(client, "read=committed") == plain  # stops at the LSO
    html = client.get("/topics/payments/messages/?read=committed").content.decode()
    assert '<option value="committed" selected>' in html
    bad = client.get("/topics/payments/messages/?read=dirty")
    assert bad.status_code == 400

    open_txn.abort_transaction(DEADLINE_S)
    assert _browsed(client, "read=committed") == plain  # aborted: never shown
    assert _browsed(client, "read=all") == plain + txn  # still in the log


def test_message_browser_shows_transaction_markers_on_request(client, viewer, bootstrap, open_txn):
    """Markers are hidden by default; the toggle shows each COMMIT/ABORT where it sits."""
    import re

    open_txn.commit_transaction(DEADLINE_S)  # COMMIT marker at payments-0 offset 7
    open_txn.begin_transaction()
    open_txn.produce("payments", b"late", partition=0)
    assert open_txn.flush(DEADLINE_S) == 0  # written, then aborted (not purged unsent)
    open_txn.abort_transaction(DEADLINE_S)  # "late" at 8, ABORT marker at 9
    client.force_login(viewer)

    def rows(query: str) -> list[tuple[str, str]]:
        html = client.get(f"/topics/payments/messages/?partition=0&seek=oldest&{query}")
        assert html.status_code == 200
        return re.findall(
            r'<tr (?:class="control-marker" )?data-partition="0" data-offset="(\d+)"'
            r'(?: data-marker="(\w+)")?',
            html.content.decode(),
        )

    records = [(str(i), "") for i in range(7)]
    assert rows("") == [*records, ("8", "")]  # no markers by default
    assert rows("markers=1") == [*records, ("7", "COMMIT"), ("8", ""), ("9", "ABORT")]
    assert rows("markers=1&read=committed") == [*records, ("7", "COMMIT")]
    newest_first = rows("markers=1&seek=newest")
    assert newest_first == [("9", "ABORT"), ("8", ""), ("7", "COMMIT"), *reversed(records)]
    page = client.get("/topics/payments/messages/?markers=1").content.decode()
    assert "COMMIT marker" in page and "ABORT marker" in page


def test_api_topic_detail_has_the_lso(operator, open_txn):
    body = _client(operator).get(f"{API}/topics/payments").json()
    rows = [(p["end_offset"], p["last_stable_offset"]) for p in body["partitions"]]
    assert rows == [(7, 4), (2, 0)]


def test_console_abort_refuses_a_transaction_that_moved_on(client, operator, bootstrap, open_txn):
    """The confirmation page carries the epoch shown; a newer instance fences the old one
    meanwhile: the abort is refused with the reason, audited as refused, nothing aborted."""
    client.force_login(operator)
    t = _client(operator).get(f"{API}/transactions").json()["transactions"][0]
    newer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "pay-1"})
    newer.init_transactions(DEADLINE_S)  # aborts the old transaction, epoch + 2
    page = client.post(
        "/transactions/pay-1/abort/",
        {"producer_id": t["producer_id"], "producer_epoch": t["producer_epoch"], "confirm": "1"},
    )
    assert page.status_code == 200
    assert "not Ongoing" in page.content.decode() or "look at it again" in page.content.decode()
    assert AuditEntry.objects.filter(action="transaction.abort.refused").count() == 1
    assert not AuditEntry.objects.filter(action="transaction.abort").exists()


def test_console_abort_refuses_the_next_transaction_of_the_same_epoch(
    client, operator, bootstrap, open_txn
):
    """The check-then-abort race closed: the operator opens the confirmation page; meanwhile
    the producer commits and begins its next transaction, which keeps the producer id and
    epoch (librdkafka sends no EndTxn v5, so no epoch bump). The abort posted from that page
    must not abort the new transaction: the coordinator checks what was seen, start time
    included, and aborts under one lock. Refused, audited as refused, the new one still open."""
    client.force_login(operator)
    page = client.get("/transactions/pay-1/abort/").content.decode()
    seen = {
        name: re.search(rf'name="{name}" value="(-?\d+)"', page).group(1)
        for name in ("producer_id", "producer_epoch", "start_ms")
    }
    open_txn.commit_transaction(DEADLINE_S)
    time.sleep(0.005)  # the next transaction starts on a later millisecond (not a timing check)
    open_txn.begin_transaction()
    open_txn.produce("payments", b"next", partition=1)
    assert open_txn.flush(DEADLINE_S) == 0
    now = _client(operator).get(f"{API}/transactions").json()["transactions"]
    assert [(t["producer_id"], t["producer_epoch"]) for t in now] == [
        (int(seen["producer_id"]), int(seen["producer_epoch"]))
    ]

    refused = client.post("/transactions/pay-1/abort/", {**seen, "confirm": "1"})
    assert refused.status_code == 200
    assert "look at it again" in refused.content.decode()
    assert AuditEntry.objects.filter(action="transaction.abort.refused").count() == 1
    assert not AuditEntry.objects.filter(action="transaction.abort").exists()
    open_txn.commit_transaction(DEADLINE_S)  # not aborted, not fenced
    assert _read_committed(bootstrap, 1)[-1] == b"next"
