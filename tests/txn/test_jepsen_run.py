"""A randomized Jepsen-style run of transactions (issue 12 item 9), checked by
tests/txn/jepsen.py: no aborted read, lost write, duplicate, inconsistent offset, precommitted
read, write-read cycle, nonmonotonic poll or poll skip.

Against Tidelog's listener in its own process (killed with SIGKILL and restarted a few times
during the run), with confluent-kafka threads in this process:

- transactional producers, each a consume-transform-produce step: it polls a few records with
  its own read_committed consumer, writes unique values to random partitions, then commits
  (most of the time), aborts, crashes before committing (drops the producer with the
  transaction open: the next instance's init_transactions, or the transaction timeout,
  aborts it) or crashes while committing (a commit given 1 ms: the outcome is unknown);
- read_committed consumers in sessions of a few seconds, each reading every partition from
  the start;
- at the end, once no transaction is open (read_committed end offsets equal the high
  watermarks), one read of everything.

Size: ``TIDELOG_TXN_JEPSEN_SECONDS`` (default 12) of load, ``TIDELOG_TXN_JEPSEN_CRASHES``
(default 2) broker kills; ``TIDELOG_TXN_JEPSEN_SEED`` repeats a run's choices (the thread
interleaving and the kill times still vary). ``TIDELOG_TXN_FLUSH=kafka`` runs the listener with
``--flush kafka`` (default: fsync).
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.txn.helpers import CrashableListener, create_topics, read_partitions
from tests.txn.jepsen import History, Poll, Txn, check, summary

TOPIC = "jepsen"
PARTITIONS = 3
PRODUCERS = 4
CONSUMERS = 2
SECONDS = float(os.environ.get("TIDELOG_TXN_JEPSEN_SECONDS", "12"))
CRASHES = int(os.environ.get("TIDELOG_TXN_JEPSEN_CRASHES", "2"))
FLUSH = os.environ.get("TIDELOG_TXN_FLUSH", "fsync")  # the listener's --flush policy
TXN_TIMEOUT_MS = 3000
OP_TIMEOUT_S = 30


class Worker(threading.Thread):
    """One transactional id; a new producer instance after each crash."""

    def __init__(self, n: int, bootstrap: str, seed: int, stop: threading.Event, txns: list):
        super().__init__(name=f"producer-{n}", daemon=True)
        self.n, self.bootstrap, self.stop, self.txns = n, bootstrap, stop, txns
        self.rng = random.Random(seed * 100 + n)
        self.polls: list[Poll] = []
        self.error: BaseException | None = None

    def producer(self) -> Producer:
        p = Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": f"jepsen-{self.n}",
            "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 2,
            "metadata.recovery.strategy": "none",  # see tests/txn/copier.py
        })  # fmt: skip
        _retry(lambda: p.init_transactions(OP_TIMEOUT_S))
        return p

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _run(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"jepsen-reader-{self.n}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
        })  # fmt: skip
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        producer = self.producer()
        count = 0
        while not self.stop.is_set():
            count += 1
            txn = Txn(f"{self.n}-{count}", "fail")
            self.txns.append(txn)
            producer = self.one_transaction(producer, consumer, txn)
        consumer.close()

    def one_transaction(self, producer: Producer, consumer: Consumer, txn: Txn) -> Producer:
        rng = self.rng
        try:
            producer.begin_transaction()
            records = [m for m in consumer.consume(rng.randint(0, 5), 0.05) if m.error() is None]
            if records:
                reads = [(m.partition(), m.offset(), m.value()) for m in records]
                txn.reads = reads
                self.polls.append(Poll(f"worker-{self.n}", time.monotonic(), reads))
            for k in range(rng.randint(1, 10)):
                value = b"%s-%d" % (txn.id.encode(), k)
                partition = rng.randrange(PARTITIONS)
                slot = len(txn.sends)
                txn.sends.append((partition, value, None))

                def delivered(err, msg, slot=slot, partition=partition, value=value):
                    if err is None:
                        txn.sends[slot] = (partition, value, msg.offset())

                producer.produce(TOPIC, value, partition=partition, on_delivery=delivered)
            roll = rng.random()
            if roll < 0.08:  # crash before commit: the transaction never commits
                producer.flush(OP_TIMEOUT_S)
                return self.producer()  # fences the dropped instance, aborting its transaction
            if roll < 0.13:  # crash while committing: unknown outcome
                txn.commit_at, txn.outcome = time.monotonic(), "info"
                try:
                    producer.commit_transaction(0.001)
                    txn.outcome = "ok"
                except KafkaException:
                    return self.producer()
                return producer
            if roll < 0.25:
                producer.flush(OP_TIMEOUT_S)
                _retry(lambda: producer.abort_transaction(OP_TIMEOUT_S))
                return producer
            txn.commit_at, txn.outcome = time.monotonic(), "info"
            _retry(lambda: producer.commit_transaction(OP_TIMEOUT_S))
            txn.outcome = "ok"
            return producer
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort() and txn.outcome == "fail":  # commit never asked
                try:
                    _retry(lambda: producer.abort_transaction(OP_TIMEOUT_S))
                    return producer
                except KafkaException:
                    pass
            elif error.txn_requires_abort():
                try:  # an abort that succeeds means the commit did not happen
                    _retry(lambda: producer.abort_transaction(OP_TIMEOUT_S))
                    txn.outcome = "fail"
                    return producer
                except KafkaException:
                    pass
            return self.producer()  # fatal (fenced, ...): a new instance


def _retry(call) -> None:
    """`call()` again while it fails with a retriable error."""
    while True:
        try:
            call()
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise


class Reader(threading.Thread):
    """read_committed sessions of 1-3 s, each from the start of every partition."""

    def __init__(self, n: int, bootstrap: str, seed: int, stop: threading.Event):
        super().__init__(name=f"reader-{n}", daemon=True)
        self.n, self.bootstrap, self.stop = n, bootstrap, stop
        self.rng = random.Random(seed * 100 + 50 + n)
        self.polls: list[Poll] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            session = 0
            while not self.stop.is_set():
                session += 1
                self.session(f"reader-{self.n}-{session}")
        except BaseException as exc:
            self.error = exc

    def session(self, name: str) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"jepsen-{name}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
        })  # fmt: skip
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        until = time.monotonic() + self.rng.uniform(1, 3)
        try:
            while time.monotonic() < until and not self.stop.is_set():
                got = [m for m in consumer.consume(200, 0.1) if m.error() is None]
                if got:
                    records = [(m.partition(), m.offset(), m.value()) for m in got]
                    self.polls.append(Poll(name, time.monotonic(), records))
        finally:
            consumer.close()


def _wait_no_open_transaction(bootstrap: str) -> None:
    tps = [KpTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    committed = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    everything = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 60
        while committed.end_offsets(tps) != everything.end_offsets(tps):
            if time.monotonic() > deadline:
                raise AssertionError("transactions still open 60 s after the run")
            time.sleep(0.2)
    finally:
        committed.close()
        everything.close()


@pytest.fixture
def seed() -> int:
    value = int(os.environ.get("TIDELOG_TXN_JEPSEN_SEED") or random.randrange(2**32))
    print(f"TIDELOG_TXN_JEPSEN_SEED={value}")  # pytest shows it when the test fails
    return value


def test_randomized_transactions_show_no_anomaly(tmp_path, seed):
    rng = random.Random(seed)
    broker = CrashableListener(str(tmp_path / "data"), FLUSH)
    txns: list[Txn] = []
    stop = threading.Event()
    with broker:
        create_topics(broker.bootstrap, PARTITIONS, TOPIC)
        workers = [Worker(n, broker.bootstrap, seed, stop, txns) for n in range(PRODUCERS)]
        readers = [Reader(n, broker.bootstrap, seed, stop) for n in range(CONSUMERS)]
        for t in workers + readers:
            t.start()
        crash_at = sorted(rng.uniform(0.2, 0.8) * SECONDS for _ in range(CRASHES))
        started = time.monotonic()
        for at in crash_at:
            time.sleep(max(0.0, started + at - time.monotonic()))
            broker.crash_and_restart()
        time.sleep(max(0.0, started + SECONDS - time.monotonic()))
        stop.set()
        for t in workers + readers:
            t.join(timeout=120)
            assert not t.is_alive(), f"seed {seed}: {t.name} did not stop"
            assert t.error is None, f"seed {seed}: {t.name} failed: {t.error!r}"
        _wait_no_open_transaction(broker.bootstrap)
        final = read_partitions(broker.bootstrap, TOPIC, PARTITIONS, with_offsets=True)
    polls = [p for t in workers + readers for p in t.polls]
    history = History(txns, sorted(polls, key=lambda p: p.returned_at), final)
    found = check(history)
    outcomes = {o: sum(t.outcome == o for t in txns) for o in ("ok", "fail", "info")}
    reads = sum(len(p.records) for p in polls)
    kept = sum(map(len, final.values()))
    print(f"transactions {outcomes}, {reads} records polled, {kept} in the end")
    assert outcomes["ok"] > 0 and outcomes["fail"] > 0 and reads > 0
    assert found == {}, f"seed {seed}, transactions {outcomes}: {summary(found)}"
