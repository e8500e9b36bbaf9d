"""A consume-transform-produce copier, in the style of Kafka's ``TransactionsTest`` copier:
it reads topic `in` with ``isolation.level=read_committed``, writes each record unchanged to the
same partition of topic `out`, and commits the output together with the input offsets
(``send_offsets_to_transaction``) in one transaction of a few records at a time.

Run as its own process so a test can kill it with SIGKILL::

    python -m tests.txn.copier --bootstrap HOST:PORT --input in --output out \\
        --group copier --transactional-id copier-1 [--max-per-txn 50] [--no-transactions]

It assigns itself every partition of `in` (no group membership: the transactional id fences an
older instance, KIP-98's model) and starts from the group's committed offsets, read only after
``init_transactions`` has aborted whatever an earlier instance left open. At its start and after
each commit it prints ``at P:OFFSET ...``, the committed input offsets, on stdout. Errors follow
librdkafka's transactional rules: a call failing with a retriable error is retried, an abortable
error aborts the transaction and rewinds the consumer to the committed offsets, a fatal one
(say, fenced) exits with status 3.

``--no-transactions`` makes it an at-least-once copier (idempotent producer, offsets committed
after each batch is flushed) for the benchmark's comparison.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

TIMEOUT_S = 30
FATAL_EXIT = 3


def partitions_of(consumer: Consumer, topic: str) -> list[int]:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            meta = consumer.list_topics(topic, timeout=5).topics[topic]
            if meta.error is None and meta.partitions:
                return sorted(meta.partitions)
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"copier: no metadata for {topic!r} in {TIMEOUT_S} s")
        time.sleep(0.2)


class Copier:
    def __init__(self, args: argparse.Namespace, *, verbose: bool = True):
        self.args = args
        self.verbose = verbose
        self.consumer = Consumer({
            "bootstrap.servers": args.bootstrap, "group.id": args.group,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
        })  # fmt: skip
        # metadata.recovery.strategy=none: with librdkafka's default (rebootstrap) a producer
        # that saw its only broker go away decommissions it, and send_offsets_to_transaction
        # then waits forever, past its timeout, for the group coordinator it had cached on that
        # broker (librdkafka issues #5511 and #5456; seen here with the broker killed mid-commit)
        config = {
            "bootstrap.servers": args.bootstrap, "linger.ms": 5,
            "metadata.recovery.strategy": "none",
        }  # fmt: skip
        if os.environ.get("TIDELOG_COPIER_DEBUG"):  # librdkafka's debug contexts, e.g. eos
            config["debug"] = os.environ["TIDELOG_COPIER_DEBUG"]
        if args.transactions:
            config |= {
                "transactional.id": args.transactional_id,
                "transaction.timeout.ms": args.transaction_timeout_ms,
            }
        else:
            config |= {"enable.idempotence": True}
        self.producer = Producer(config)
        self.partitions = [
            TopicPartition(args.input, p) for p in partitions_of(self.consumer, args.input)
        ]
        self.next_offsets: dict[int, int] = {}

    def rewind(self) -> None:
        """Continue from the group's committed offsets (the start when there are none)."""
        while True:
            try:
                committed = self.consumer.committed(self.partitions, timeout=TIMEOUT_S)
                break
            except KafkaException as exc:  # e.g. the broker is restarting
                if not exc.args[0].retriable():
                    raise
                time.sleep(0.2)
        self.next_offsets = {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
        for tp in committed:
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
        self.consumer.assign(committed)
        self.report()

    def report(self) -> None:
        """``at P:OFFSET ...``: the input offsets committed so far (absolute, so a report lost
        with a killed instance is repeated by the next one's first)."""
        if not self.verbose:
            return
        at = " ".join(f"{p}:{o}" for p, o in sorted(self.next_offsets.items()))
        print(f"at {at}", flush=True)

    def offsets(self) -> list[TopicPartition]:
        return [TopicPartition(self.args.input, p, o) for p, o in self.next_offsets.items()]

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(TIMEOUT_S)

    def start(self) -> None:
        """Fence older instances (aborting what they left open), then continue from the
        committed offsets."""
        if self.args.transactions:
            self.producer.init_transactions(TIMEOUT_S)
        self.rewind()

    def copy(self, until: dict[int, int] | None = None) -> None:
        """Copy forever, or until the committed offsets reach `until` (partition: offset)."""
        while until is None or any(self.next_offsets.get(p, 0) < o for p, o in until.items()):
            batch = [
                m
                for m in self.consumer.consume(self.args.max_per_txn, timeout=0.5)
                if m.error() is None
            ]
            if not batch:
                continue
            if self.args.transactions:
                self.copy_in_transaction(batch)
            else:
                self.copy_at_least_once(batch)
            self.report()

    def _produce(self, batch) -> None:
        for m in batch:
            self.next_offsets[m.partition()] = m.offset() + 1
            while True:
                try:
                    self.producer.produce(
                        self.args.output, m.value(), m.key(), partition=m.partition()
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)

    def copy_in_transaction(self, batch) -> None:
        try:
            self.producer.begin_transaction()
            self._produce(batch)
            self._retried(
                self.producer.send_offsets_to_transaction,
                self.offsets(),
                self.consumer.consumer_group_metadata(),
                TIMEOUT_S,
            )
            self._retried(self.producer.commit_transaction, TIMEOUT_S)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if not error.txn_requires_abort():
                raise
            print(f"aborting: {error}", file=sys.stderr, flush=True)
            self._retried(self.producer.abort_transaction, TIMEOUT_S)
            self.rewind()

    @staticmethod
    def _retried(call, *args) -> None:
        """`call(*args)` again while it fails with a retriable error (librdkafka's rule for
        send_offsets_to_transaction, commit_transaction and abort_transaction)."""
        while True:
            try:
                call(*args)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise

    def copy_at_least_once(self, batch) -> None:
        self._produce(batch)
        if self.producer.flush(TIMEOUT_S):
            raise SystemExit("copier: records still unsent after the flush timeout")
        self.consumer.commit(offsets=self.offsets(), asynchronous=False)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", default="copier")
    parser.add_argument("--max-per-txn", type=int, default=50)
    parser.add_argument("--transaction-timeout-ms", type=int, default=10_000)
    parser.add_argument("--no-transactions", dest="transactions", action="store_false")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    copier = Copier(args)
    try:
        copier.start()
        copier.copy()
    except KafkaException as exc:
        print(f"copier: fatal: {exc}", file=sys.stderr, flush=True)
        return FATAL_EXIT
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
