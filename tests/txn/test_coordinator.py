"""The transaction coordinator and a partition's transaction state without the network: what a
coordinator restarted after a crash does with each state (Kafka's: PrepareCommit is completed,
PrepareAbort aborted, Ongoing left to its timeout), and the aborted index and open
transactions of a partition rebuilt from the log when its files lag behind."""

from __future__ import annotations

import os
import threading

import pytest

from streams.errors import InvalidTxnState, ProducerFenced, TransactionalProducerFenced
from streams.groups import GroupCoordinator
from streams.groups.schemas import offsets_partition_for
from streams.log import KAFKA_FLUSH_DEFAULTS, LogStore
from streams.log import records as rb
from streams.log import txn as ptxn
from streams.log.records import ProducerRecord
from streams.txn import TransactionCoordinator, TxnState


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class Broker:
    """A store, group and transaction coordinators, opened and closed together (closed without
    waiting for anything more, as a crashed process leaves them)."""

    def __init__(self, path, clock: Clock, topic_defaults=None):
        self.store = LogStore.open(
            str(path), clock=clock, background=False, topic_defaults=topic_defaults
        )
        if "t" not in self.store.list_topics():
            self.store.create_topic("t", 2)
        self.groups = GroupCoordinator(self.store, clock=clock)
        self.groups.load()
        self.txns = TransactionCoordinator(
            self.store, self.groups, self.store.allocate_producer_id, clock=clock
        ).load()

    def produce(self, partition: int, values, pid: int, epoch: int, seq: int) -> int:
        data = rb.build_batch(
            [ProducerRecord(v) for v in values],
            now_ms=1_700_000_000_000,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            attributes_extra=rb.ATTR_TRANSACTIONAL,
        )
        done = self.store.produce("t", partition, data, self.txns.verify_produce)
        self.store.sync_to("t", partition, done.sync_to)
        return done.base_offset

    def values(self, partition: int) -> list[bytes]:
        return [r.value for r in self.store.read("t", partition, 0, max_records=1000)]

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _prepared(b: Broker, commit: bool) -> tuple[int, int]:
    """A transaction over both partitions and a group's offsets, persisted as Prepare* with
    no marker written yet: where a crash inside EndTxn leaves it."""
    pid, epoch = b.txns.init_producer_id("copier", 60_000)
    b.txns.add_partitions("copier", pid, epoch, [("t", 0), ("t", 1)])
    b.txns.add_offsets("copier", pid, epoch, "group")
    b.produce(0, [b"a", b"b"], pid, epoch, 0)
    b.produce(1, [b"c"], pid, epoch, 0)
    b.txns.txn_offset_commit("copier", pid, epoch, "group", {("in", 0): (42, "")})
    meta = b.txns._txns["copier"]
    meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    b.txns._persist(meta)
    return pid, epoch


def test_a_restarted_coordinator_completes_a_prepared_commit(tmp_path, clock):
    b = Broker(tmp_path, clock)
    _prepared(b, commit=True)
    assert b.store.partition_log("t", 0).last_stable_offset == 0  # still open
    assert b.groups.committed("group") == {}
    b.close()

    b = Broker(tmp_path, clock)  # load() finishes the commit
    try:
        for p, values in ((0, [b"a", b"b"]), (1, [b"c"])):
            plog = b.store.partition_log("t", p)
            assert plog.txns.open == {}
            assert plog.last_stable_offset == plog.high_watermark == len(values) + 1
            assert plog.txns.aborted == ()
            assert b.values(p) == values
        assert b.groups.committed("group")[("in", 0)].offset == 42
        assert b.txns._txns["copier"].state == TxnState.COMPLETE_COMMIT
    finally:
        b.close()


def test_a_prepared_commit_whose_markers_fail_at_load_is_not_taken_for_hanging(
    tmp_path, clock, monkeypatch
):
    """At load, a PrepareCommit whose markers cannot be written yet stays PrepareCommit (and
    is retried): its open partitions belong to it, so the hanging-transaction sweep must not
    abort them behind its back (a COMMIT marker would then follow an ABORT)."""
    from streams.errors import StorageError

    b = Broker(tmp_path, clock)
    pid, _ = _prepared(b, commit=True)
    b.close()
    real = LogStore.append_markers

    def refused(self, partitions, producer_id, epoch, commit, *args, **kwargs):
        if commit:  # the COMMIT markers fail; an ABORT (the sweep's) would go through
            raise StorageError("the disk is not ready")
        return real(self, partitions, producer_id, epoch, commit, *args, **kwargs)

    monkeypatch.setattr(LogStore, "append_markers", refused)
    b = Broker(tmp_path, clock)
    try:
        monkeypatch.setattr(LogStore, "append_markers", real)
        meta = b.txns._txns["copier"]
        assert meta.state == TxnState.PREPARE_COMMIT
        for p in (0, 1):
            plog = b.store.partition_log("t", p)
            assert plog.txns.open == {pid: 0}, "the prepared commit's partition was aborted"
            assert plog.txns.aborted == ()
        b.txns._try_complete(meta)  # the retry
        assert meta.state == TxnState.COMPLETE_COMMIT
        assert b.values(0) == [b"a", b"b"] and b.values(1) == [b"c"]
        assert b.groups.committed("group")[("in", 0)].offset == 42
    finally:
        b.close()


def test_a_restarted_coordinator_completes_a_prepared_abort(tmp_path, clock):
    b = Broker(tmp_path, clock)
    pid, _ = _prepared(b, commit=False)
    b.close()
    b = Broker(tmp_path, clock)
    try:
        plog = b.store.partition_log("t", 0)
        assert plog.last_stable_offset == plog.high_watermark == 3
        assert [(a.producer_id, a.first_offset, a.last_offset) for a in plog.txns.aborted] == [
            (pid, 0, 2)
        ]
        assert b.groups.committed("group") == {}  # an aborted transaction's offsets never land
        assert b.txns._txns["copier"].state == TxnState.COMPLETE_ABORT
    finally:
        b.close()


def test_an_ongoing_transaction_survives_a_restart_until_its_timeout(tmp_path, clock):
    b = Broker(tmp_path, clock)
    pid, epoch = b.txns.init_producer_id("slow", 10_000)
    b.txns.add_partitions("slow", pid, epoch, [("t", 0)])
    b.produce(0, [b"x"], pid, epoch, 0)
    b.close()

    b = Broker(tmp_path, clock)
    try:
        plog = b.store.partition_log("t", 0)
        assert plog.txns.open == {pid: 0}  # rebuilt from the log
        assert plog.last_stable_offset == 0
        assert b.txns.abort_timed_out(clock.now + 5_000) == 0
        b.produce(0, [b"y"], pid, epoch, 1)  # its producer may still go on
        assert b.txns.abort_timed_out(clock.now + 10_001) == 1
        assert plog.last_stable_offset == plog.high_watermark == 3
        with pytest.raises(TransactionalProducerFenced):  # the abort bumped the epoch
            b.txns.end_txn("slow", pid, epoch, commit=True)
        with pytest.raises(ProducerFenced):
            b.txns.verify_produce("t", 0, rb.parse_header(_header_only(pid, epoch)))
    finally:
        b.close()


def test_add_partitions_waits_for_no_disk_and_a_transaction_it_lost_is_aborted_at_load(
    tmp_path, clock, monkeypatch
):
    """AddPartitionsToTxn answers without an fdatasync (the produce's acknowledgement waits
    for the state log instead: ``sync_state``). If a crash of the machine loses its record
    while the partition kept the records, nothing holds that transaction any more: the next
    load aborts it (Kafka's hanging transaction), and leaves a transaction it holds open."""
    from tests.log.test_durability import SyncLog

    b = Broker(tmp_path, clock)
    pid, epoch = b.txns.init_producer_id("app", 60_000)
    syncs = SyncLog(monkeypatch)
    b.txns.add_partitions("app", pid, epoch, [("t", 0)])
    assert len(syncs) == 0, "AddPartitionsToTxn waited for an fdatasync"
    b.txns.sync_state()
    assert any("__transaction_state" in path for path, _ in syncs.syncs)
    monkeypatch.undo()
    b.produce(0, [b"kept"], pid, epoch, 0)
    # what a lost AddPartitionsToTxn of partition 1 leaves: its records, in no transaction
    data = rb.build_batch(
        [ProducerRecord(b"lost")], now_ms=clock.now, producer_id=pid, producer_epoch=epoch,
        base_sequence=0, attributes_extra=rb.ATTR_TRANSACTIONAL,
    )  # fmt: skip
    b.store.sync_to("t", 1, b.store.produce("t", 1, data).sync_to)
    assert b.store.partition_log("t", 1).last_stable_offset == 0
    b.close()

    b = Broker(tmp_path, clock)
    try:
        lost = b.store.partition_log("t", 1)
        assert lost.txns.open == {}
        assert lost.last_stable_offset == lost.high_watermark == 2  # the record, its ABORT
        assert b.store.read("t", 1, 0, committed=True) == []
        kept = b.store.partition_log("t", 0)
        assert kept.txns.open == {pid: 0} and kept.last_stable_offset == 0  # still ongoing
        b.txns.end_txn("app", pid, epoch, commit=True)
        assert [r.value for r in b.store.read("t", 0, 0, committed=True)] == [b"kept"]
    finally:
        b.close()


def test_the_embedded_producer_acknowledges_after_its_transaction_state_is_on_disk(
    tmp_path, clock, monkeypatch
):
    from streams.client.producer import Producer
    from tests.log.test_durability import SyncLog

    b = Broker(tmp_path, clock)
    try:
        p = Producer(b.store, transactional_id="emb", transactions=b.txns, linger_ms=1)
        p.init_transactions()
        syncs = SyncLog(monkeypatch)
        p.begin_transaction()
        assert p.send("t", b"v", partition=0).result(10).offset == 0
        done = list(syncs.syncs)
        state = b.store.partition_log("__transaction_state", 0).segments[-1].path
        size = os.path.getsize(state)
        assert any(path == os.path.realpath(state) and covered >= size for path, covered in done), (
            "the record was acknowledged before its AddPartitionsToTxn record was on disk"
        )
        p.commit_transaction(10)
        p.close()
    finally:
        b.close()


def _header_only(pid: int, epoch: int) -> bytes:
    return rb.build_batch(
        [ProducerRecord(b"z")],
        now_ms=1,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        attributes_extra=rb.ATTR_TRANSACTIONAL,
    )


def test_init_fences_the_older_instance_and_aborts_its_transaction(tmp_path, clock):
    b = Broker(tmp_path, clock)
    try:
        pid, epoch = b.txns.init_producer_id("app", 60_000)
        b.txns.add_partitions("app", pid, epoch, [("t", 0)])
        b.produce(0, [b"zombie"], pid, epoch, 0)
        pid2, epoch2 = b.txns.init_producer_id("app", 60_000)
        assert (pid2, epoch2) == (pid, epoch + 2)  # +1 for the abort markers, +1 for the new one
        plog = b.store.partition_log("t", 0)
        assert plog.last_stable_offset == plog.high_watermark == 2
        assert [a.first_offset for a in plog.txns.aborted] == [0]
        with pytest.raises(TransactionalProducerFenced):
            b.txns.add_partitions("app", pid, epoch, [("t", 1)])
        with pytest.raises(InvalidTxnState):  # nothing ongoing for the new epoch yet
            b.txns.verify_produce("t", 0, rb.parse_header(_header_only(pid, epoch2)))
    finally:
        b.close()


def test_the_aborted_index_is_rebuilt_from_the_log_when_its_file_lags(tmp_path, clock, monkeypatch):
    """A crash between an ABORT marker reaching the disk and its index entry (here: the entry
    is never written): the checkpoint stays below the abort, and the next open finds it in
    the log."""
    b = Broker(tmp_path, clock)
    pid, epoch = b.txns.init_producer_id("app", 60_000)
    b.txns.add_partitions("app", pid, epoch, [("t", 0)])
    b.produce(0, [b"gone"], pid, epoch, 0)
    monkeypatch.setattr(ptxn.PartitionTxns, "save", lambda self: None)
    b.txns.end_txn("app", pid, epoch, commit=False)
    directory = b.store.partition_log("t", 0).directory
    assert len(b.store.partition_log("t", 0).txns.aborted) == 1  # in memory only
    b.close()  # checkpoints: the transaction state's must stay at or below offset 0
    monkeypatch.undo()
    assert not os.path.exists(os.path.join(directory, ptxn.INDEX_FILE))
    b = Broker(tmp_path, clock)
    try:
        plog = b.store.partition_log("t", 0)
        assert [(a.producer_id, a.first_offset, a.last_offset) for a in plog.txns.aborted] == [
            (pid, 0, 1)
        ]
        assert os.path.exists(os.path.join(directory, ptxn.INDEX_FILE))  # written again
        assert plog.last_stable_offset == 2
    finally:
        b.close()


# ---------------------------------------------------------------------- compaction


def _compacted_broker(tmp_path, clock) -> Broker:
    b = Broker(tmp_path, clock)
    b.store.create_topic("c", 1, {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"})
    return b


def _txn_write(b: Broker, topic: str, key: bytes, value: bytes, pid: int, epoch: int, seq: int):
    data = rb.build_batch(
        [ProducerRecord(value, key)],
        now_ms=clock_now(),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes_extra=rb.ATTR_TRANSACTIONAL,
    )
    done = b.store.produce(topic, 0, data, b.txns.verify_produce)
    b.store.sync_to(topic, 0, done.sync_to)


def clock_now() -> int:
    return 1_700_000_000_000


def _latest(b: Broker, topic: str) -> dict[bytes, bytes]:
    plog = b.store.partition_log(topic, 0)
    out = {}
    for r in b.store.read(topic, 0, plog.log_start_offset, max_records=1000):
        out[r.key] = r.value
    return out


def test_compaction_drops_aborted_records_and_never_lets_them_supersede(tmp_path, clock):
    b = _compacted_broker(tmp_path, clock)
    try:
        b.store.append("c", b"committed", key=b"k")
        pid, epoch = b.txns.init_producer_id("w", 60_000)
        b.txns.add_partitions("w", pid, epoch, [("c", 0)])
        _txn_write(b, "c", b"k", b"aborted", pid, epoch, 0)
        b.txns.end_txn("w", pid, epoch, commit=False)
        b.store.partition_log("c", 0).roll()
        b.store.compact(force=True)
        assert _latest(b, "c") == {b"k": b"committed"}  # the aborted value is gone
    finally:
        b.close()


def test_compaction_stops_at_the_last_stable_offset(tmp_path, clock):
    b = _compacted_broker(tmp_path, clock)
    try:
        b.store.append("c", b"committed", key=b"k")
        pid, epoch = b.txns.init_producer_id("w", 60_000)
        b.txns.add_partitions("w", pid, epoch, [("c", 0)])
        _txn_write(b, "c", b"k", b"open", pid, epoch, 0)
        b.store.partition_log("c", 0).roll()
        b.store.compact(force=True)
        # the open transaction may yet abort: the committed value must still be there
        values = [r.value for r in b.store.read("c", 0, 0, max_records=10)]
        assert values == [b"committed", b"open"]
        b.txns.end_txn("w", pid, epoch, commit=False)
        b.store.partition_log("c", 0).roll()
        b.store.compact(force=True)
        assert _latest(b, "c") == {b"k": b"committed"}
    finally:
        b.close()


def test_a_producer_goes_on_with_its_sequence_after_a_restart_past_its_markers(tmp_path, clock):
    """The producer state replayed from the log tail ignores markers (they carry the producer
    id but no sequence), so the next transaction's batch continues the sequence."""
    b = Broker(tmp_path, clock)
    pid, epoch = b.txns.init_producer_id("seq", 60_000)
    b.txns.add_partitions("seq", pid, epoch, [("t", 0)])
    b.produce(0, [b"a", b"b"], pid, epoch, 0)
    b.txns.end_txn("seq", pid, epoch, commit=True)
    b.close()  # no producer-state snapshot: the next open replays the log tail
    b = Broker(tmp_path, clock)
    try:
        b.txns.add_partitions("seq", pid, epoch, [("t", 0)])
        assert b.produce(0, [b"c"], pid, epoch, 2) == 3  # after a, b and the marker
        b.txns.end_txn("seq", pid, epoch, commit=True)
        assert b.values(0) == [b"a", b"b", b"c"]
    finally:
        b.close()


def test_markers_the_disk_refused_are_written_by_the_next_timer_turn(tmp_path, clock, monkeypatch):
    from streams.errors import ConcurrentTransactions, StorageError

    b = Broker(tmp_path, clock)
    try:
        pid, epoch = b.txns.init_producer_id("disk", 60_000)
        b.txns.add_partitions("disk", pid, epoch, [("t", 0)])
        b.produce(0, [b"x"], pid, epoch, 0)
        plog = b.store.partition_log("t", 0)

        def refused(*args, **kwargs):
            raise StorageError("the disk refused the marker", 28)

        monkeypatch.setattr(plog, "append_marker", refused)
        with pytest.raises(StorageError):
            b.txns.end_txn("disk", pid, epoch, commit=True)
        assert b.txns._txns["disk"].state == TxnState.PREPARE_COMMIT  # decided, not yet done
        assert plog.last_stable_offset == 0
        with pytest.raises(ConcurrentTransactions):  # the producer must wait for it
            b.txns.add_partitions("disk", pid, epoch, [("t", 1)])
        b.txns.abort_timed_out(clock.now)  # still refused: logged, left for the next turn
        monkeypatch.undo()
        b.txns.abort_timed_out(clock.now)
        assert b.txns._txns["disk"].state == TxnState.COMPLETE_COMMIT
        assert plog.last_stable_offset == plog.high_watermark == 2
        assert b.txns.end_txn("disk", pid, epoch, commit=True) == (pid, epoch)  # a retry: ok
    finally:
        b.close()


# ---------------------------------------------------------------------- embedded consumer


def test_the_embedded_consumer_reads_committed_or_everything(tmp_path, clock):
    from streams.client.consumer import Consumer

    b = Broker(tmp_path, clock)
    try:
        pid, epoch = b.txns.init_producer_id("w", 60_000)
        seq = 0
        for values, commit in (([b"c1", b"c2"], True), ([b"a1"], False), ([b"c3"], True)):
            b.txns.add_partitions("w", pid, epoch, [("t", 0)])
            b.produce(0, values, pid, epoch, seq)
            seq += len(values)
            b.txns.end_txn("w", pid, epoch, commit=commit)
        b.store.append("t", b"plain", partition=0)
        b.txns.add_partitions("w", pid, epoch, [("t", 0)])
        b.produce(0, [b"open"], pid, epoch, seq)  # still open
        b.store.append("t", b"after-open", partition=0)

        def read(isolation: str) -> list[bytes]:
            c = Consumer(b.store, isolation_level=isolation, auto_offset_reset="earliest")
            c.assign([("t", 0)])
            got: list[bytes] = []
            for _ in range(5):
                got += [r.value for r in c.poll(max_records=100)]
            c.close()
            return got

        assert read("read_committed") == [b"c1", b"c2", b"c3", b"plain"]  # stops at the LSO
        assert read("read_uncommitted") == [
            b"c1", b"c2", b"a1", b"c3", b"plain", b"open", b"after-open"
        ]  # fmt: skip
        b.txns.end_txn("w", pid, epoch, commit=False)
        assert read("read_committed") == [b"c1", b"c2", b"c3", b"plain", b"after-open"]
    finally:
        b.close()


# ---------------------------------------------------------------------- embedded producer


def test_the_embedded_producer_commits_aborts_and_is_fenced(tmp_path, clock):
    from streams.client.consumer import Consumer
    from streams.client.producer import Producer

    b = Broker(tmp_path, clock)
    try:

        def producer() -> Producer:
            p = Producer(
                b.store,
                transactional_id="embedded",
                transactions=b.txns,
                linger_ms=1,
            )
            p.init_transactions()
            return p

        p = producer()
        p.begin_transaction()
        futures = [p.send("t", b"c%d" % i, key=b"k%d" % i) for i in range(10)]
        p.send_offsets_to_transaction({("in", 0): 10}, "copier")
        p.commit_transaction(10)
        assert all(f.result().offset >= 0 for f in futures)
        assert b.groups.committed("copier")[("in", 0)].offset == 10
        p.begin_transaction()
        for i in range(5):
            p.send("t", b"a%d" % i, key=b"k%d" % i)
        p.send_offsets_to_transaction({("in", 0): 15}, "copier")
        p.abort_transaction(10)
        assert b.groups.committed("copier")[("in", 0)].offset == 10
        p.begin_transaction()
        p.send("t", b"zombie", partition=0).result(10)
        newer = producer()  # fences `p`, aborting its open transaction
        with pytest.raises(TransactionalProducerFenced):
            p.commit_transaction(10)
        newer.begin_transaction()
        newer.send("t", b"newer", partition=1)
        newer.commit_transaction(10)
        p.close()
        newer.close()

        def read(isolation: str) -> set[bytes]:
            c = Consumer(b.store, isolation_level=isolation, auto_offset_reset="earliest")
            c.assign([("t", 0), ("t", 1)])
            got: list[bytes] = []
            for _ in range(5):
                got += [r.value for r in c.poll(max_records=100)]
            c.close()
            assert len(got) == len(set(got))  # nothing twice
            return set(got)

        committed = {b"c%d" % i for i in range(10)} | {b"newer"}
        assert read("read_committed") == committed
        aborted = {b"a%d" % i for i in range(5)} | {b"zombie"}
        assert read("read_uncommitted") == committed | aborted
    finally:
        b.close()


# ---------------------------------------------------------------------- markers after EndTxn


class MarkerGate:
    """Holds the store's marker writes until `open()`: the window between EndTxn's answer
    (Prepare* on disk) and the completer's markers, made as long as a test needs."""

    def __init__(self, store: LogStore, monkeypatch) -> None:
        self._event = threading.Event()
        self._write = store.append_markers

        def held(*args, **kwargs):
            self._event.wait()
            return self._write(*args, **kwargs)

        monkeypatch.setattr(store, "append_markers", held)

    def open(self) -> None:
        self._event.set()


def test_end_txn_answers_at_prepare_and_the_next_transaction_waits_for_the_markers(
    tmp_path, clock, monkeypatch
):
    from streams.errors import ConcurrentTransactions
    from streams.txn import coordinator

    b = Broker(tmp_path, clock)
    gate = MarkerGate(b.store, monkeypatch)
    try:
        pid, epoch = b.txns.init_producer_id("w", 60_000)
        b.txns.add_partitions("w", pid, epoch, [("t", 0)])
        b.produce(0, [b"a", b"b"], pid, epoch, 0)
        plog = b.store.partition_log("t", 0)
        # answered with no marker written: the decision is on disk, nothing is visible yet
        assert b.txns.end_txn("w", pid, epoch, commit=True, wait_for_markers=False) == (
            pid,
            epoch,
        )
        assert b.txns._txns["w"].state == TxnState.PREPARE_COMMIT
        assert plog.last_stable_offset == 0  # read_committed readers see none of it
        assert b.store.fetch("t", 0, 0, 1 << 20, committed=True).records == b""
        # the producer's next transaction waits for the markers, then is refused for now
        monkeypatch.setattr(coordinator, "COMPLETION_WAIT_S", 0.01)
        with pytest.raises(ConcurrentTransactions):
            b.txns.add_partitions("w", pid, epoch, [("t", 0)])
        with pytest.raises(ConcurrentTransactions):
            b.txns.init_producer_id("w", 60_000)
        monkeypatch.setattr(coordinator, "COMPLETION_WAIT_S", 60.0)
        gate.open()
        b.txns.add_partitions("w", pid, epoch, [("t", 0)])  # waits for them: then goes on
        assert b.txns._txns["w"].state == TxnState.ONGOING
        assert plog.last_stable_offset == plog.high_watermark == 3
        assert b.values(0) == [b"a", b"b"]
    finally:
        gate.open()
        b.txns.close()
        b.close()


def test_a_restart_between_the_answered_commit_and_its_markers_completes_it(
    tmp_path, clock, monkeypatch
):
    b = Broker(tmp_path, clock)
    gate = MarkerGate(b.store, monkeypatch)
    pid, epoch = b.txns.init_producer_id("copier", 60_000)
    b.txns.add_partitions("copier", pid, epoch, [("t", 0), ("t", 1)])
    b.txns.add_offsets("copier", pid, epoch, "group")
    b.produce(0, [b"a"], pid, epoch, 0)
    b.produce(1, [b"b"], pid, epoch, 0)
    b.txns.txn_offset_commit("copier", pid, epoch, "group", {("in", 0): (7, "")})
    b.txns.end_txn("copier", pid, epoch, commit=True, wait_for_markers=False)
    b.close()  # a crash: the markers were never written
    gate.open()  # the old completer now finds its store closed (logged)

    b = Broker(tmp_path, clock)  # load() writes the markers and the offsets
    try:
        for p, values in ((0, [b"a"]), (1, [b"b"])):
            plog = b.store.partition_log("t", p)
            assert plog.last_stable_offset == plog.high_watermark == 2
            assert b.values(p) == values
        assert b.groups.committed("group")[("in", 0)].offset == 7
        assert b.txns._txns["copier"].state == TxnState.COMPLETE_COMMIT
    finally:
        b.close()


def test_two_threads_saving_the_aborted_index_write_each_entry_once(tmp_path, monkeypatch):
    """The completer and the timer thread may both save a partition's aborted index (each
    after its own marker); an entry written twice would make readers skip the producer's
    records up to a second ABORT marker, committed ones included."""
    from types import SimpleNamespace

    txns = ptxn.PartitionTxns(str(tmp_path))
    txns.begin_if_new(SimpleNamespace(producer_id=7), 0)
    txns.end(7, commit=False, marker_offset=3, hw=3)
    syncing = [threading.Event(), threading.Event()]
    release = threading.Event()
    fdatasync = os.fdatasync

    def slow(fd):  # the first save is inside its fsync while the second one starts
        syncing[syncing[0].is_set()].set()
        release.wait(10)
        fdatasync(fd)

    monkeypatch.setattr(ptxn.os, "fdatasync", slow)
    savers = [threading.Thread(target=txns.save) for _ in range(2)]
    savers[0].start()
    assert syncing[0].wait(10)
    savers[1].start()
    syncing[1].wait(0.5)  # the old save got here, with the same entry; the new one waits
    release.set()
    for t in savers:
        t.join()
    with open(os.path.join(tmp_path, ptxn.INDEX_FILE), "rb") as f:
        assert len(f.read()) == ptxn._ENTRY.size  # one entry, once


def test_only_requests_that_wait_on_nothing_are_answered_on_the_callers_thread(tmp_path, clock):
    """``held_if_unblocked`` (the listener answers on its loop when it yields True): under
    Kafka's flush policy, with the lock free, for anything but an abort (the aborted index's
    fdatasync); a commit with group offsets only with the group coordinator's lock free too
    and no fdatasync of ``__consumer_offsets`` due. Under the default policy, or with a lock
    held elsewhere, never: a lock is not waited for."""
    relaxed = Broker(tmp_path / "relaxed", clock, topic_defaults=KAFKA_FLUSH_DEFAULTS)
    strict = Broker(tmp_path / "strict", clock)
    try:

        def unblocked(b: Broker, commit=None) -> bool:
            with b.txns.held_if_unblocked("copier", commit) as free:
                return free

        for b in (relaxed, strict):
            pid, epoch = b.txns.init_producer_id("copier", 60_000)
            b.txns.add_partitions("copier", pid, epoch, [("t", 0)])
        assert (unblocked(relaxed), unblocked(relaxed, True)) == (True, True)
        assert unblocked(relaxed, False) is False  # an abort: the aborted index's fdatasync
        assert (unblocked(strict), unblocked(strict, True)) == (False, False)

        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with relaxed.txns._lock:
                holding.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        holding.wait(30)
        try:
            assert unblocked(relaxed) is False  # taken elsewhere: not waited for
        finally:
            release.set()
            holder.join()
        assert unblocked(relaxed) is True

        pid, epoch = (
            relaxed.txns._txns["copier"].producer_id,
            relaxed.txns._txns["copier"].producer_epoch,
        )
        relaxed.txns.add_offsets("copier", pid, epoch, "group")
        assert unblocked(relaxed, True) is True  # a group with no offsets yet
        relaxed.txns.txn_offset_commit("copier", pid, epoch, "group", {("in", 0): (7, "")})
        # the offsets go through the group coordinator's lock, held with the coordinator's
        # when free, and need no fdatasync of __consumer_offsets yet (flush.messages 10000)
        with relaxed.txns.held_if_unblocked("copier", True) as free:
            assert free is True
            assert relaxed.groups._lock._is_owned()

        def hold_groups() -> None:
            with relaxed.groups._lock:
                holding.set()
                release.wait(30)

        holding.clear()
        release.clear()
        holder = threading.Thread(target=hold_groups)
        holder.start()
        holding.wait(30)
        try:
            assert unblocked(relaxed, True) is False  # a rebalance may hold it over an fsync
            assert unblocked(relaxed) is True  # what does not write offsets is not held up
        finally:
            release.set()
            holder.join()
        offsets_log = relaxed.store.partition_log(
            "__consumer_offsets", offsets_partition_for("group")
        )
        offsets_log._unflushed_records = 9_999  # the next commit crosses flush.messages
        assert unblocked(relaxed, True) is False
        offsets_log._unflushed_records = 0
        assert unblocked(relaxed, True) is True
        relaxed.txns.end_txn("copier", pid, epoch, True)
        assert relaxed.groups.offsets.committed("group")[("in", 0)].offset == 7
    finally:
        relaxed.close()
        strict.close()


def test_a_commit_completed_soon_is_answered_first_and_waited_for(tmp_path, clock):
    """Under Kafka's flush policy the listener's EndTxn passes `complete_soon` (its loop,
    after the answer is written): end_txn returns at PrepareCommit with the markers and the
    offsets still to write; the id's next request waits for them (not answered on the
    caller's thread meanwhile); the completion writes them. Found busy (the lock taken
    elsewhere), it is handed to the completer thread instead, never waited for."""
    b = Broker(tmp_path, clock, topic_defaults=KAFKA_FLUSH_DEFAULTS)
    try:
        pid, epoch = b.txns.init_producer_id("copier", 60_000)
        soon: list = []
        for n in (1, 2):
            b.txns.add_partitions("copier", pid, epoch, [("t", 0)])
            data = rb.build_batch(
                [ProducerRecord(b"r%d" % n)],
                now_ms=clock.now,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=n - 1,
                attributes_extra=rb.ATTR_TRANSACTIONAL,
            )
            b.store.produce("t", 0, data, b.txns.verify_produce)  # no fdatasync waited for
            b.txns.add_offsets("copier", pid, epoch, "group")
            b.txns.txn_offset_commit("copier", pid, epoch, "group", {("in", 0): (n, "")})
            with b.txns.held_if_unblocked("copier", True) as free:
                assert free
                b.txns.end_txn(
                    "copier", pid, epoch, True, wait_for_markers=False, complete_soon=soon.append
                )
            assert len(soon) == 1
            assert b.txns._txns["copier"].state == TxnState.PREPARE_COMMIT
            assert b.store.offsets("t", 0, committed=True)[1] == 2 * (n - 1)  # no marker yet
            before = b.groups.offsets.committed("group").get(("in", 0))
            assert (before and before.offset) == (None if n == 1 else 1)  # not yet n
            with b.txns.held_if_unblocked("copier") as free:
                assert free is False  # the next request goes to a worker thread and waits
            if n == 1:
                waited = threading.Thread(
                    target=b.txns.add_partitions, args=("copier", pid, epoch, [("t", 1)])
                )
                waited.start()
                waited.join(0.2)
                assert waited.is_alive()  # until the completion
                soon.pop()()
                waited.join(30)
                assert b.txns._txns["copier"].state == TxnState.ONGOING
            else:  # found busy: the completer thread does it
                holding, release = threading.Event(), threading.Event()

                def hold(holding: threading.Event, release: threading.Event) -> None:
                    with b.txns._lock:
                        holding.set()
                        release.wait(30)

                holder = threading.Thread(target=hold, args=(holding, release))
                holder.start()
                holding.wait(30)
                soon.pop()()  # returns at once
                release.set()
                holder.join()
                with b.txns._lock:
                    assert b.txns._done.wait_for(lambda: not b.txns._completing, 30)
                assert b.txns._txns["copier"].state == TxnState.COMPLETE_COMMIT
            assert b.store.offsets("t", 0, committed=True)[1] == 2 * n  # record + marker
            assert b.groups.offsets.committed("group")[("in", 0)].offset == n
        b.txns.close()
    finally:
        b.close()
