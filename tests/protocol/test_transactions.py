"""Transactions with real clients (issue 12 items 1-3, 7): confluent-kafka (librdkafka 2.16),
kafka-python 3.0 and aiokafka 0.14 commit and abort; read_committed consumers never see aborted
records and see committed ones exactly once, read_uncommitted ones see both; a second producer
with the same transactional id fences the first; the last stable offset holds read_committed
readers (Fetch and ListOffsets) back while a transaction is open; and a broker killed with
SIGKILL in the middle of a transaction comes back with it open, aborts it at its timeout, and
keeps it aborted across another crash."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError

DEADLINE_S = 30


# ---------------------------------------------------------------------- helpers


def _consume_confluent(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    """Every value of partition 0 readable under `isolation`: reads until `expect` values
    arrived, then a little longer to catch any extra (a duplicate or an aborted record)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        quiet_until = None
        while time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.2):
                assert m.error() is None, m.error()
                got.append(m.value())
            if len(got) >= expect:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() > quiet_until:
                    break
        return got
    finally:
        c.close()


def _values(prefix: str, n: int) -> list[bytes]:
    return [b"%s-%03d" % (prefix.encode(), i) for i in range(n)]


def _check_isolation(bootstrap: str, topic: str, committed: list[bytes], aborted: list[bytes]):
    got = _consume_confluent(bootstrap, topic, "read_committed", len(committed))
    assert got == committed  # exactly once each, in order, nothing aborted
    everything = _consume_confluent(
        bootstrap, topic, "read_uncommitted", len(committed) + len(aborted)
    )
    assert sorted(everything) == sorted(committed + aborted)


# ---------------------------------------------------------------------- confluent-kafka


def _confluent_producer(bootstrap: str, txn_id: str, **config) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **config})
    p.init_transactions(DEADLINE_S)
    return p


def test_confluent_kafka_commit_and_abort(broker, bootstrap):
    broker.store.create_topic("ck", 1)
    p = _confluent_producer(bootstrap, "ck-txn")
    committed, aborted = _values("c1", 50), _values("a", 30)
    p.begin_transaction()
    for v in committed:
        p.produce("ck", value=v)
    p.commit_transaction(DEADLINE_S)
    p.begin_transaction()
    for v in aborted:
        p.produce("ck", value=v)
    assert p.flush(DEADLINE_S) == 0  # on the broker, so the abort has something to abort
    p.abort_transaction(DEADLINE_S)
    more = _values("c2", 20)
    p.begin_transaction()
    for v in more:
        p.produce("ck", value=v)
    p.commit_transaction(DEADLINE_S)
    _check_isolation(bootstrap, "ck", committed + more, aborted)
    plog = broker.store.partition_log("ck", 0)
    # three markers were written; nothing is open, so the LSO is the high watermark
    assert plog.high_watermark == 50 + 30 + 20 + 3
    assert plog.last_stable_offset == plog.high_watermark
    assert [(a.first_offset, a.last_offset) for a in plog.txns.aborted] == [(51, 81)]


def test_confluent_kafka_zombie_is_fenced(broker, bootstrap):
    broker.store.create_topic("zombie", 1)
    old = _confluent_producer(bootstrap, "zombie-txn")
    old.begin_transaction()
    for v in _values("old", 10):
        old.produce("zombie", value=v)
    assert old.flush(DEADLINE_S) == 0
    new = _confluent_producer(bootstrap, "zombie-txn")  # fences `old`, aborting its transaction
    with pytest.raises(KafkaException) as caught:
        old.commit_transaction(DEADLINE_S)
    assert caught.value.args[0].fatal()  # fenced: the old instance can do nothing more
    new.begin_transaction()
    for v in _values("new", 10):
        new.produce("zombie", value=v)
    new.commit_transaction(DEADLINE_S)
    _check_isolation(bootstrap, "zombie", _values("new", 10), _values("old", 10))


def _settled(broker, txn_id: str) -> None:
    """Wait until the coordinator completed `txn_id`'s ended transaction: EndTxn is answered
    once PrepareCommit/PrepareAbort is durable, and the markers and offsets follow (Kafka's
    order)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        states = {t.transactional_id: t.state for t in broker.transactions.describe()}
        if states.get(txn_id) in ("CompleteCommit", "CompleteAbort"):
            return
        time.sleep(0.01)
    raise AssertionError(f"{txn_id}: not completed within {DEADLINE_S} s")


def test_offsets_sent_in_a_transaction_appear_only_at_commit(broker, bootstrap):
    broker.store.create_topic("offs-in", 1)
    broker.store.create_topic("offs-out", 1)
    p = _confluent_producer(bootstrap, "offs-txn")
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "copier", "enable.auto.commit": False}
    )
    try:
        p.begin_transaction()
        p.produce("offs-out", value=b"x")
        metadata = consumer.consumer_group_metadata()
        p.send_offsets_to_transaction([TopicPartition("offs-in", 0, 7)], metadata, DEADLINE_S)
        assert p.flush(DEADLINE_S) == 0
        assert broker.coordinator.committed("copier") == {}  # not before the commit
        p.commit_transaction(DEADLINE_S)
        _settled(broker, "offs-txn")  # EndTxn is answered at the commit point, offsets after
        assert broker.coordinator.committed("copier")[("offs-in", 0)].offset == 7
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition("offs-in", 0, 9)], metadata, DEADLINE_S)
        p.abort_transaction(DEADLINE_S)
        _settled(broker, "offs-txn")
        assert broker.coordinator.committed("copier")[("offs-in", 0)].offset == 7  # never 9
    finally:
        consumer.close()


def test_last_stable_offset_holds_read_committed_readers_back(broker, bootstrap):
    broker.store.create_topic("lso", 1)
    plain = Producer({"bootstrap.servers": bootstrap})
    for v in _values("plain", 5):
        plain.produce("lso", value=v)
    assert plain.flush(DEADLINE_S) == 0
    p = _confluent_producer(bootstrap, "lso-txn")
    p.begin_transaction()
    for v in _values("open", 5):
        p.produce("lso", value=v)
    assert p.flush(DEADLINE_S) == 0
    for v in _values("after", 5):  # written after the open transaction's first record
        plain.produce("lso", value=v)
    assert plain.flush(DEADLINE_S) == 0

    def end_offsets(isolation: str) -> int:
        kc = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
        try:
            return kc.end_offsets([KpTopicPartition("lso", 0)])[KpTopicPartition("lso", 0)]
        finally:
            kc.close()

    assert end_offsets("read_committed") == 5  # ListOffsets isolation_level=1: the LSO
    assert end_offsets("read_uncommitted") == 15
    assert _consume_confluent(bootstrap, "lso", "read_committed", 5) == _values("plain", 5)
    p.commit_transaction(DEADLINE_S)
    _settled(broker, "lso-txn")  # the LSO moves when the COMMIT marker is written
    assert end_offsets("read_committed") == 16
    got = _consume_confluent(bootstrap, "lso", "read_committed", 15)
    assert sorted(got) == sorted(_values("plain", 5) + _values("open", 5) + _values("after", 5))


def test_a_forgotten_transaction_is_aborted_at_its_timeout(broker, bootstrap):
    broker.store.create_topic("forgotten", 1)
    p = _confluent_producer(bootstrap, "forgetful", **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    for v in _values("lost", 5):
        p.produce("forgotten", value=v)
    assert p.flush(DEADLINE_S) == 0
    plog = broker.store.partition_log("forgotten", 0)
    assert plog.last_stable_offset == 0
    deadline = time.monotonic() + DEADLINE_S
    while plog.last_stable_offset == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert plog.last_stable_offset == plog.high_watermark == 6  # aborted: marker at 5
    with pytest.raises(KafkaException):  # the epoch was bumped: the producer is fenced
        p.commit_transaction(DEADLINE_S)
    _check_isolation(bootstrap, "forgotten", [], _values("lost", 5))


# ---------------------------------------------------------------------- kafka-python


def test_kafka_python_commit_abort_and_fencing(broker, bootstrap):
    broker.store.create_topic("kp", 1)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn")
    p.init_transactions()
    p.begin_transaction()
    for v in _values("c", 20):
        p.send("kp", value=v, partition=0)
    p.commit_transaction()
    p.begin_transaction()
    for v in _values("a", 20):
        p.send("kp", value=v, partition=0)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    for v in _values("z", 5):
        p.send("kp", value=v, partition=0)
    p.flush()
    newer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn")
    newer.init_transactions()  # fences `p`, aborting its open transaction
    with pytest.raises(KafkaError):
        p.commit_transaction()
    p.close(timeout=5)
    newer.close(timeout=5)

    def read(isolation: str, expect: int) -> list[bytes]:
        c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
        try:
            c.assign([KpTopicPartition("kp", 0)])
            c.seek(KpTopicPartition("kp", 0), 0)
            got: list[bytes] = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and len(got) < expect + 1:
                for records in c.poll(timeout_ms=300).values():
                    got += [r.value for r in records]
                if len(got) >= expect and not c.poll(timeout_ms=700):
                    break
            return got
        finally:
            c.close()

    assert read("read_committed", 20) == _values("c", 20)
    assert sorted(read("read_uncommitted", 45)) == sorted(
        _values("c", 20) + _values("a", 20) + _values("z", 5)
    )


# ---------------------------------------------------------------------- aiokafka


def test_aiokafka_commit_abort_and_fencing(broker, bootstrap):
    broker.store.create_topic("aio", 1)

    async def produce() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
        await p.start()
        try:
            async with p.transaction():
                for v in _values("c", 20):
                    await p.send("aio", v, partition=0)
            await p.begin_transaction()
            for v in _values("a", 20):
                await p.send_and_wait("aio", v, partition=0)
            await p.abort_transaction()
            await p.begin_transaction()
            await p.send_and_wait("aio", b"zombie", partition=0)
            newer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
            await newer.start()  # fences `p`
            try:
                with pytest.raises(Exception) as caught:
                    await p.commit_transaction()
                assert "Fenced" in type(caught.value).__name__ or "epoch" in str(caught.value)
                async with newer.transaction():
                    await newer.send("aio", b"newer", partition=0)
            finally:
                await newer.stop()
        finally:
            await p.stop()

    async def consume(isolation: str, expect: int) -> list[bytes]:
        from aiokafka import TopicPartition as AioTp

        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
        await c.start()
        try:
            c.assign([AioTp("aio", 0)])
            c.seek(AioTp("aio", 0), 0)
            got: list[bytes] = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=300)
                new = [r.value for rs in batches.values() for r in rs]
                got += new
                if len(got) >= expect and not new:
                    break
            return got
        finally:
            await c.stop()

    asyncio.run(produce())
    committed = _values("c", 20) + [b"newer"]
    assert asyncio.run(consume("read_committed", 21)) == committed
    everything = asyncio.run(consume("read_uncommitted", 42))
    assert sorted(everything) == sorted(committed + _values("a", 20) + [b"zombie"])


# ---------------------------------------------------------------------- kill -9


def _start_process(data: Path, port: int = 0) -> tuple[subprocess.Popen, str]:
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.protocol", "--data-dir", str(data), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    return proc, proc.stdout.readline().strip().removeprefix("listening on ")


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=DEADLINE_S)


def test_a_transaction_open_when_the_broker_is_killed_is_aborted_after_restart(tmp_path):
    """SIGKILL with a transaction open: after the restart it is still open (the LSO holds
    read_committed readers before it), its timeout aborts it, and the abort survives another
    SIGKILL (the aborted index is recovered)."""
    data = tmp_path / "data"
    proc, bootstrap = _start_process(data)
    try:
        p = _confluent_producer(bootstrap, "crash-txn", **{"transaction.timeout.ms": 3000})
        p.begin_transaction()
        for v in _values("c", 10):
            p.produce("crashy", value=v)
        p.commit_transaction(DEADLINE_S)
        p.begin_transaction()
        for v in _values("a", 10):
            p.produce("crashy", value=v)
        assert p.flush(DEADLINE_S) == 0
    finally:
        _kill(proc)
    proc, bootstrap = _start_process(data)
    try:
        # read_committed stops at the open transaction until the restarted coordinator aborts
        # it (3 s after it began); then the aborted records stay hidden
        _check_isolation(bootstrap, "crashy", _values("c", 10), _values("a", 10))
        kc = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
        tp = KpTopicPartition("crashy", 0)
        deadline = time.monotonic() + DEADLINE_S
        while kc.end_offsets([tp])[tp] < 22 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert kc.end_offsets([tp])[tp] == 22  # 10 + marker + 10 + abort marker: not hanging
        kc.close()
    finally:
        _kill(proc)
    proc, bootstrap = _start_process(data)
    try:
        _check_isolation(bootstrap, "crashy", _values("c", 10), _values("a", 10))
    finally:
        _kill(proc)


def test_a_producer_finishes_its_transaction_across_a_broker_sigkill(tmp_path):
    """The broker is killed in the middle of a transaction and restarted on the same port; the
    producer (librdkafka) goes on and commits: the coordinator's Ongoing state, the partition's
    open transaction and the producer's sequence all came back, and read_committed readers see
    every record exactly once."""
    data = tmp_path / "data"
    proc, bootstrap = _start_process(data)
    port = int(bootstrap.rsplit(":", 1)[1])
    p = _confluent_producer(bootstrap, "survivor", **{"transaction.timeout.ms": 60_000})
    try:
        p.begin_transaction()
        for v in _values("before", 10):
            p.produce("survive", value=v)
        assert p.flush(DEADLINE_S) == 0
    finally:
        _kill(proc)
    proc, bootstrap = _start_process(data, port)
    try:
        for v in _values("after", 10):
            p.produce("survive", value=v)
        p.commit_transaction(DEADLINE_S)
        expected = _values("before", 10) + _values("after", 10)
        _check_isolation(bootstrap, "survive", expected, [])
    finally:
        _kill(proc)


# ---------------------------------------------------------------------- admin


def test_kafka_python_admin_lists_and_describes_transactions_and_producers(broker, bootstrap):
    from kafka.admin import KafkaAdminClient

    broker.store.create_topic("adm", 1)
    p = _confluent_producer(bootstrap, "adm-txn")
    p.begin_transaction()
    for v in _values("open", 3):
        p.produce("adm", value=v)
    assert p.flush(DEADLINE_S) == 0
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = [t for ts in admin.list_transactions().values() for t in ts]
        assert [(t.transactional_id, str(t.state.value)) for t in listed] == [
            ("adm-txn", "Ongoing")
        ]
        assert admin.list_transactions(state_filters=["CompleteCommit"]) == {0: []}
        d = admin.describe_transactions(["adm-txn"])["adm-txn"]
        assert d.topic_partitions == {KpTopicPartition("adm", 0)}
        assert d.transaction_start_time_ms > 0
        producers = admin.describe_producers([KpTopicPartition("adm", 0)])
        (state,) = producers[KpTopicPartition("adm", 0)].active_producers
        assert (state.producer_id, state.producer_epoch) == (d.producer_id, d.producer_epoch)
        assert state.current_transaction_start_offset == 0  # the open transaction begins at 0
        p.commit_transaction(DEADLINE_S)
        _settled(broker, "adm-txn")  # the COMMIT marker follows the answer
        tp = KpTopicPartition("adm", 0)
        (state,) = admin.describe_producers([tp])[tp].active_producers
        assert state.current_transaction_start_offset == -1
        assert admin.describe_transactions(["adm-txn"])["adm-txn"].state.value == ("CompleteCommit")
    finally:
        admin.close()


def test_an_embedded_producer_and_a_kafka_client_share_a_transactional_id(broker, bootstrap):
    broker.store.create_topic("shared", 1)
    embedded = broker.transactional_producer("shared-txn", linger_ms=1)
    embedded.init_transactions()
    embedded.begin_transaction()
    embedded.send("shared", b"embedded", partition=0).result(DEADLINE_S)
    kafka_client = _confluent_producer(bootstrap, "shared-txn")  # fences the embedded one
    with pytest.raises(Exception, match="fenced"):
        embedded.commit_transaction(DEADLINE_S)
    embedded.close()
    kafka_client.begin_transaction()
    kafka_client.produce("shared", value=b"kafka")
    kafka_client.commit_transaction(DEADLINE_S)
    _check_isolation(bootstrap, "shared", [b"kafka"], [b"embedded"])
