"""Exactly-once copying through crashes (issue 12 item 8), after Kafka's ``TransactionsTest``:
a consume-transform-produce copier (tests/txn/copier.py: read `in` read_committed, write `out`,
``send_offsets_to_transaction``, commit) runs as a subprocess while the broker (Tidelog's
listener, its own process) and the copier are each killed with SIGKILL and restarted several
times. Afterwards `out` read with read_committed equals `in` read with read_committed, partition
by partition and in order: the same records, none lost, none twice. It runs under both flush
policies of the listener (``--flush fsync``, the default, and ``--flush kafka``).

`in` is written before the copier starts by a transactional producer that aborts some of its
transactions, so the copier's read_committed consumer must skip those.

Size: ``TIDELOG_TXN_COPIER_RECORDS`` (default 4,000, a CI run of some seconds) input records
and ``TIDELOG_TXN_COPIER_CRASHES`` (default 6) crashes, spread over the copy; e.g. 200,000 and 40
for a long run. ``TIDELOG_TXN_COPIER_SEED`` repeats a run (the seed is printed on failure).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Producer

from tests.kafka_servers import REPO_ROOT
from tests.txn.helpers import CrashableListener, create_topics, read_partitions

PARTITIONS = 3
RECORDS = int(os.environ.get("TIDELOG_TXN_COPIER_RECORDS", "4000"))
CRASHES = int(os.environ.get("TIDELOG_TXN_COPIER_CRASHES", "6"))
STALL_S = 120  # no progress for this long: the copy is stuck, fail


def seed_input(bootstrap: str, rng: random.Random) -> tuple[dict[int, list[bytes]], dict]:
    """Write RECORDS committed values (and some aborted ones) to `in`; return the committed
    values of each partition in order, and the offset after each partition's last committed
    record (where a copier that copied everything has its offsets)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "seeder"})
    ends: dict[int, int] = {}

    def delivered(err, msg) -> None:
        assert err is None, err
        if msg.value().startswith(b"rec"):
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    producer.init_transactions(60)
    committed: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    written = 0
    while written < RECORDS:
        abort = rng.random() < 0.2
        size = min(rng.randint(1, 200), RECORDS - written) if not abort else rng.randint(1, 50)
        producer.begin_transaction()
        batch = []
        for _ in range(size):
            p = rng.randrange(PARTITIONS)
            value = b"%s-%d-%07d" % (b"aborted" if abort else b"rec", p, written + len(batch))
            producer.produce("in", value, partition=p, on_delivery=delivered)
            batch.append((p, value))
        if abort:
            producer.flush(60)  # on the broker, so there is something to skip
            producer.abort_transaction(60)
            continue
        producer.commit_transaction(60)
        for p, value in batch:
            committed[p].append(value)
        written += size
    producer.flush(60)
    return committed, ends


class CopierProcess:
    """tests/txn/copier.py as a subprocess; `at` holds the highest committed input offset of
    each partition any of its instances reported."""

    def __init__(self, bootstrap: str, log_path: str):
        self.bootstrap = bootstrap
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.at: dict[int, int] = {}
        self.starts = 0
        self.fatal_exits = 0

    def progress(self, ends: dict[int, int]) -> float:
        """The fraction of the input committed as copied."""
        done = sum(min(self.at.get(p, 0), end) for p, end in ends.items())
        return done / max(1, sum(ends.values()))

    def start(self) -> None:
        args = [
            sys.executable, "-m", "tests.txn.copier", "--bootstrap", self.bootstrap,
            "--input", "in", "--output", "out", "--group", "copier",
            "--transactional-id", "copier-1", "--max-per-txn", "40",
        ]  # fmt: skip
        with open(self.log_path, "ab") as err:
            self.process = subprocess.Popen(
                args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err, text=True
            )
        self.starts += 1
        threading.Thread(target=self._read, args=(self.process,), daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            if line.startswith("at "):
                for item in line.split()[1:]:
                    p, offset = map(int, item.split(":"))
                    self.at[p] = max(self.at.get(p, 0), offset)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=60)

    def restart_if_exited(self) -> None:
        """A copier fenced or failed fatally exits with status 3: start a new instance, as an
        operator's supervisor would. Any other exit is a bug of the copier."""
        code = self.process.poll()
        if code is None:
            return
        if code != 3:
            raise AssertionError(f"the copier exited with {code}:\n{self.log_tail()}")
        self.fatal_exits += 1
        self.start()

    def log_tail(self, lines: int = 30) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])


@pytest.fixture
def seed() -> int:
    value = int(os.environ.get("TIDELOG_TXN_COPIER_SEED") or random.randrange(2**32))
    print(f"TIDELOG_TXN_COPIER_SEED={value}")  # pytest shows it when the test fails
    return value


# fsync: the listener's default flush policy; kafka: ``--flush kafka`` (acknowledged from the
# page cache), which a SIGKILL of the broker must not cost a record either
@pytest.mark.parametrize("flush", ["fsync", "kafka"])
def test_copier_output_equals_input_through_broker_and_copier_sigkills(tmp_path, seed, flush):
    rng = random.Random(seed)
    broker = CrashableListener(str(tmp_path / "data"), flush)
    with broker:
        copier = CopierProcess(broker.bootstrap, str(tmp_path / "copier.log"))
        create_topics(broker.bootstrap, PARTITIONS, "in", "out")
        expected, ends = seed_input(broker.bootstrap, rng)
        copier.start()
        try:
            crashes = {"broker": 0, "copier": 0}
            for i in range(1, CRASHES + 1):
                # crash i once about i/(CRASHES+1) of the input has been copied
                _wait_for(copier, ends, i / (CRASHES + 1) + rng.uniform(0, 0.5 / CRASHES), seed)
                time.sleep(rng.uniform(0, 0.2))
                victim = rng.choice(["broker", "copier"])
                crashes[victim] += 1
                if victim == "broker":
                    broker.crash_and_restart()
                else:
                    copier.kill()
                    copier.start()
            _wait_for(copier, ends, 1.0, seed)
        finally:
            copier.kill()
        got = read_partitions(broker.bootstrap, "out", PARTITIONS)
    detail = (
        f"seed {seed}, crashes {crashes}, copier starts {copier.starts} "
        f"(fenced/fatal exits {copier.fatal_exits})"
    )
    for p in range(PARTITIONS):
        _assert_same(expected[p], got[p], f"partition {p} ({detail})")


def _wait_for(copier: CopierProcess, ends: dict[int, int], fraction: float, seed: int) -> None:
    """Until the copier's committed offsets cover `fraction` of the input; fails when nothing
    moves for STALL_S."""
    last, moved = copier.progress(ends), time.monotonic()
    while copier.progress(ends) < fraction:
        copier.restart_if_exited()
        if copier.progress(ends) != last:
            last, moved = copier.progress(ends), time.monotonic()
        elif time.monotonic() - moved > STALL_S:
            raise AssertionError(
                f"seed {seed}: the copy is stuck at {last:.1%} (offsets {copier.at}, input ends "
                f"{ends}) for {STALL_S} s; copier log:\n{copier.log_tail()}"
            )
        time.sleep(0.01)


def _assert_same(expected: list[bytes], got: list[bytes], where: str) -> None:
    if got == expected:
        return
    seen: dict[bytes, int] = {}
    for v in got:
        seen[v] = seen.get(v, 0) + 1
    duplicates = sorted(v for v, n in seen.items() if n > 1)
    lost = sorted(set(expected) - set(seen))
    extra = sorted(set(seen) - set(expected))
    raise AssertionError(
        f"{where}: out != in: {len(got)} records for {len(expected)}; "
        f"duplicates {duplicates[:5]} ({len(duplicates)}), lost {lost[:5]} ({len(lost)}), "
        f"never in `in` {extra[:5]} ({len(extra)}); "
        f"same multiset, other order: {sorted(got) == sorted(expected)}"
    )
