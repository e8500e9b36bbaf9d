"""A checker of transactional Kafka histories, after the anomalies of Jepsen's kafka workload
(jepsen.tests.kafka; Kingsbury's analysis of Redpanda, 2022, and of Kafka's transactions).

A history is what a randomized run observed (tests/txn/test_jepsen_run.py):

- ``Txn``: one transaction of one producer. `sends` are (partition, value, offset) with the
  offset the broker acknowledged (None if it never did); `reads` are (partition, offset, value)
  its own read_committed consumer polled inside the transaction (a consume-transform-produce
  step). `outcome` is ``ok`` (commit acknowledged), ``fail`` (certainly never committed:
  aborted, or abandoned by a crash before commit was asked for) or ``info`` (commit asked for,
  outcome unknown). `commit_at` is when commit was asked for (time.monotonic of the one test
  process), None if never.
- ``Poll``: one poll of a read_committed consumer session: (partition, offset, value) in the
  order returned, and when the poll returned. A session reads each partition forward from
  where it was assigned.
- `final`: per partition, every (offset, value) a read_committed consumer reads from the start
  to the end once every transaction is over.

Every value is written once (unique values), so a value names its transaction. ``check``
returns ``{anomaly: [examples]}`` for the anomalies found, nothing for a good history:

- ``aborted-read``: a read_committed read returned a value of a transaction that never
  committed (``fail``);
- ``lost-write``: a value of a committed transaction (``ok``) is not in `final`;
- ``duplicate``: a value is at two offsets (by reads, `final` or acknowledgements);
- ``inconsistent-offset``: two different values were seen at one (partition, offset), by reads
  or acknowledgements;
- ``precommitted-read``: a poll returned a value before its transaction's commit was even asked
  for (the read returned at a time earlier than `commit_at`, or commit was never asked);
- ``wr-cycle`` (G1c-like): committed transactions whose write->read dependencies form a cycle
  (T1 read what T2 wrote and T2 read what T1 wrote): read_committed makes that impossible;
- ``nonmonotonic-poll``: a session read a partition at an offset not above the one before;
- ``poll-skip``: a session went from offset a to offset b on a partition while `final` has a
  value between them (a committed record the session silently jumped over).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict

Read = tuple[int, int, bytes]  # partition, offset, value


@dataclasses.dataclass
class Txn:
    id: str
    outcome: str  # "ok" | "fail" | "info"
    sends: list[tuple[int, bytes, int | None]] = dataclasses.field(default_factory=list)
    reads: list[Read] = dataclasses.field(default_factory=list)
    commit_at: float | None = None


@dataclasses.dataclass
class Poll:
    session: str
    returned_at: float
    records: list[Read]


@dataclasses.dataclass
class History:
    txns: list[Txn]
    polls: list[Poll]
    final: dict[int, list[tuple[int, bytes]]]


def check(history: History) -> dict[str, list]:
    found: dict[str, list] = defaultdict(list)
    writer: dict[bytes, Txn] = {}
    for txn in history.txns:
        if txn.outcome not in ("ok", "fail", "info"):
            raise ValueError(f"transaction {txn.id}: outcome {txn.outcome!r}")
        for _, value, _ in txn.sends:
            if value in writer:
                raise ValueError(f"value {value!r} written twice: the run must use unique values")
            writer[value] = txn
    reads = [(r, None) for p in history.polls for r in p.records]
    reads += [(r, txn) for txn in history.txns for r in txn.reads]
    final_reads = [(p, o, v) for p, records in history.final.items() for o, v in records]

    _aborted_reads(found, writer, list(dict.fromkeys([r for r, _ in reads] + final_reads)))
    _lost_writes(found, history)
    _offsets(found, history, [r for r, _ in reads] + final_reads)
    _precommitted(found, writer, history)
    _wr_cycles(found, writer, history)
    _sessions(found, history)
    return dict(found)


def _aborted_reads(found, writer, reads: list[Read]) -> None:
    for p, o, v in reads:
        txn = writer.get(v)
        if txn is not None and txn.outcome == "fail":
            found["aborted-read"].append({"partition": p, "offset": o, "value": v, "txn": txn.id})


def _lost_writes(found, history: History) -> None:
    seen = {v for records in history.final.values() for _, v in records}
    for txn in history.txns:
        if txn.outcome != "ok":
            continue
        for p, v, o in txn.sends:
            if v not in seen:
                found["lost-write"].append({"partition": p, "offset": o, "value": v, "txn": txn.id})


def _offsets(found, history: History, reads: list[Read]) -> None:
    at: dict[tuple[int, int], set[bytes]] = defaultdict(set)
    where: dict[bytes, set[tuple[int, int]]] = defaultdict(set)
    for p, o, v in reads:
        at[(p, o)].add(v)
        where[v].add((p, o))
    for txn in history.txns:
        for p, v, o in txn.sends:
            if o is not None:
                at[(p, o)].add(v)
                where[v].add((p, o))
    for (p, o), values in sorted(at.items()):
        if len(values) > 1:
            found["inconsistent-offset"].append(
                {"partition": p, "offset": o, "values": sorted(values)}
            )
    for v, places in where.items():
        if len(places) > 1:
            found["duplicate"].append({"value": v, "at": sorted(places)})


def _precommitted(found, writer, history: History) -> None:
    for poll in history.polls:
        for p, o, v in poll.records:
            txn = writer.get(v)
            if txn is None or txn.outcome == "fail":
                continue  # an aborted read is reported as such
            if txn.commit_at is None or poll.returned_at < txn.commit_at:
                found["precommitted-read"].append(
                    {"partition": p, "offset": o, "value": v, "txn": txn.id,
                     "read_at": poll.returned_at, "commit_at": txn.commit_at}
                )  # fmt: skip


def _wr_cycles(found, writer, history: History) -> None:
    """Tarjan's strongly connected components over committed transactions, an edge T1 -> T2
    when T2 read a value T1 wrote; a component of two or more is a cycle."""
    graph: dict[str, set[str]] = defaultdict(set)
    committed = [t for t in history.txns if t.outcome == "ok"]
    for reader in committed:
        for _, _, v in reader.reads:
            w = writer.get(v)
            if w is not None and w.outcome == "ok" and w.id != reader.id:
                graph[w.id].add(reader.id)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = [0]

    def visit(root: str) -> None:  # iterative, so a long chain cannot exhaust the stack
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        n = stack.pop()
                        on_stack.discard(n)
                        component.append(n)
                        if n == node:
                            break
                    if len(component) > 1:
                        found["wr-cycle"].append(sorted(component))

    for t in committed:
        if t.id not in index:
            visit(t.id)


def _sessions(found, history: History) -> None:
    final_offsets = {p: sorted(o for o, _ in records) for p, records in history.final.items()}
    last: dict[tuple[str, int], int] = {}
    for poll in history.polls:
        for p, o, _ in poll.records:
            key = (poll.session, p)
            prev = last.get(key)
            last[key] = o
            if prev is None:
                continue
            if o <= prev:
                found["nonmonotonic-poll"].append(
                    {"session": poll.session, "partition": p, "from": prev, "to": o}
                )
                continue
            skipped = _between(final_offsets.get(p, []), prev, o)
            if skipped:
                found["poll-skip"].append(
                    {"session": poll.session, "partition": p, "from": prev, "to": o,
                     "skipped": skipped[:5]}
                )  # fmt: skip


def _between(sorted_offsets: list[int], low: int, high: int) -> list[int]:
    i = bisect.bisect_right(sorted_offsets, low)
    j = bisect.bisect_left(sorted_offsets, high)
    return sorted_offsets[i:j]


def summary(found: dict[str, list], examples: int = 3) -> str:
    """One line per anomaly: how many, and the first few."""
    return "; ".join(
        f"{name}: {len(items)}, e.g. {items[:examples]}" for name, items in sorted(found.items())
    )
