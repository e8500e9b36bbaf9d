"""A job with a global source (a search's queries topic, read whole by every task) over the Kafka
protocol: ``KafkaLog`` against Tidelog's listener, two workers in the job's group.

Every task must know every query before it matches the events after it: the first worker's
tasks read the queries before their first input record, tasks reopened by a rebalance get them
replayed, the second worker's read them from the start, and a query changed later reaches both.
A query written in a transaction that is still open holds nothing up (read_committed: it
applies once committed)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from streams.jobs import JSON, Job
from streams.jobs.kafka import KafkaLog
from streams.jobs.runner import Runner
from tests.protocol.conftest import open_broker

DEADLINE_S = 60


def search_job() -> Job:
    job = Job("find-over-kafka")
    job.stream("logs", value=JSON).search(queries="saved").to("found")
    return job


@pytest.fixture
def broker(tmp_path):
    b = open_broker(tmp_path / "data")
    b.store.create_topic("logs", 4)
    b.store.create_topic("saved", 1, {"cleanup.policy": "compact"})
    yield b
    b.close()


@pytest.fixture
def bootstrap(broker) -> str:
    host, port = broker.kafka_address
    return f"{host}:{port}"


def produce(bootstrap: str, topic: str, records, producer: Producer | None = None) -> None:
    p = producer or Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value, partition in records:
        body = None if value is None else json.dumps(value).encode()
        extra = {} if partition is None else {"partition": partition}
        p.produce(topic, body, key.encode(), **extra)
    if producer is None:
        assert p.flush(30) == 0


def read_found(bootstrap: str) -> list[tuple[str, int]]:
    """(query id, event's "n") of every committed record of "found"."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition("found", p, 0) for p in range(4)])
    out, done = [], set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(done) < 4:
            assert time.monotonic() < deadline, "found: no end in sight"
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    v = json.loads(m.value())
                    out.append((v["query"], v["event"]["n"]))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                else:
                    raise AssertionError(m.error().str())
    finally:
        c.close()
    return sorted(out)


class Worker:
    def __init__(self, bootstrap: str):
        log = KafkaLog(
            bootstrap,
            client_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 100},
        )
        self.runner = Runner(search_job(), log=log, checkpoint_interval_ms=100)
        self.stop, self.errors = threading.Event(), []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.runner.run(self.stop.is_set, idle_sleep_s=0.01)
        except BaseException as exc:  # noqa: BLE001 - reported by close()
            self.errors.append(exc)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.runner.close()
        assert not self.errors, self.errors


def wait_for(cond, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def events(ns, status="error"):
    return [(f"k{n}", {"status": status, "n": n}, n % 4) for n in ns]


def test_every_task_of_every_worker_knows_every_query(bootstrap):
    produce(bootstrap, "saved", [("err", {"query": "status:error"}, None)])
    produce(bootstrap, "logs", events(range(4)))  # already there when the worker starts
    workers = [Worker(bootstrap)]
    try:
        # the first round reads the queries to their end before any event: all four match
        wait_for(lambda: len(read_found(bootstrap)) >= 4, "a match per event already there")
        assert read_found(bootstrap) == [("err", n) for n in range(4)]

        workers.append(Worker(bootstrap))  # a rebalance: reopened tasks get the queries again
        wait_for(
            lambda: (
                all(w.runner.tasks for w in workers)
                and sum(len(w.runner.tasks) for w in workers) == 4
            ),
            "the two workers to share the tasks",
        )
        produce(bootstrap, "logs", events(range(4, 8)))
        wait_for(lambda: len(read_found(bootstrap)) >= 8, "a match per event on both workers")

        # a query changed later reaches the tasks of both workers
        produce(bootstrap, "saved", [("err", {"query": "status:warn"}, None)])
        produce(bootstrap, "saved", [("all", {"query": "n:[0 TO 100]"}, None)])
        wait_for(
            lambda: all(w.runner._global_pos.get(("saved", 0), 0) >= 3 for w in workers),
            "both workers to read the changed queries",
        )
        produce(bootstrap, "logs", events(range(8, 12), status="warn"))
        wait_for(lambda: len(read_found(bootstrap)) >= 16, "the changed queries to match")
        found = read_found(bootstrap)
        assert found == sorted([("err", n) for n in range(12)] + [("all", n) for n in range(8, 12)])
    finally:
        for w in workers:
            w.close()


def test_a_query_in_an_open_transaction_holds_nothing_up(bootstrap):
    produce(bootstrap, "saved", [("err", {"query": "status:error"}, None)])
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "query-writer"})
    txn.init_transactions(30)
    txn.begin_transaction()
    produce(bootstrap, "saved", [("warn", {"query": "status:warn"}, None)], producer=txn)
    txn.flush(30)
    worker = Worker(bootstrap)
    try:
        produce(bootstrap, "logs", events(range(4)) + events(range(4, 8), status="warn"))
        # the committed query matches at once; the open one does not apply yet
        wait_for(lambda: len(read_found(bootstrap)) >= 4, "the committed query's matches")
        time.sleep(1)  # more rounds: the open transaction's query must still not apply
        assert read_found(bootstrap) == [("err", n) for n in range(4)]

        txn.commit_transaction(30)
        wait_for(  # offset 1 is the query, 2 its transaction's commit marker
            lambda: worker.runner._global_pos.get(("saved", 0), 0) >= 2,
            "the committed query to be read",
        )
        produce(bootstrap, "logs", events(range(8, 12), status="warn"))
        wait_for(lambda: len(read_found(bootstrap)) >= 8, "the new query's matches")
        assert read_found(bootstrap) == sorted(
            [("err", n) for n in range(4)] + [("warn", n) for n in range(8, 12)]
        )
    finally:
        worker.close()
