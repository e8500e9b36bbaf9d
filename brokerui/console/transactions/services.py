"""Transactions (KIP-98) for operators: the open ones, per partition last stable offsets, and
an operator's abort of a hanging transaction (what ``kafka-transactions.sh --abort`` is for).

Called alike by the console's views and the JSON API. The abort writes one audit record
through the `AuditSink` it is given:

=========================  ======================================================================
action                     before / after
=========================  ======================================================================
transaction.abort          producer_id, producer_epoch, state, partitions ["topic-p"], groups,
                           start_ms, timeout_ms / state, producer_epoch (bumped: fenced)
transaction.abort.refused  the same before (as the operator saw it) / reason
=========================  ======================================================================
"""

from __future__ import annotations

import dataclasses

from brokerui.audit.services import Actor, AuditSink
from streams.cluster import Cluster, TransactionDescription
from streams.errors import InvalidTxnState, TidelogError, UnknownTransactionalId, Unsupported


@dataclasses.dataclass(frozen=True)
class TransactionRow:
    """One transaction as the page and the API show it, at `as_of_ms`."""

    txn: TransactionDescription
    as_of_ms: int

    def __getattr__(self, name):  # the description's fields, as if they were the row's
        if name.startswith("__") or name == "txn":  # copy/pickle probe before __init__ ran
            raise AttributeError(name)
        return getattr(self.txn, name)

    @property
    def age_ms(self) -> int | None:
        return None if self.txn.start_ms < 0 else max(0, self.as_of_ms - self.txn.start_ms)

    @property
    def timeout_in_ms(self) -> int | None:
        """Until the coordinator's timeout aborts it (0: due now); None if not Ongoing."""
        if self.txn.state != "Ongoing" or self.age_ms is None:
            return None
        return max(0, self.txn.timeout_ms - self.age_ms)

    @property
    def hanging(self) -> bool:
        """Open longer than its own timeout: the coordinator should have aborted it."""
        return self.txn.state != "Ongoing" or self.timeout_in_ms == 0

    @property
    def partition_names(self) -> list[str]:
        return [f"{t}-{p}" for t, p in self.txn.partitions]


@dataclasses.dataclass(frozen=True)
class TransactionsView:
    rows: list[TransactionRow]
    as_of_ms: int
    unavailable: str | None = None  # why the cluster cannot list transactions (external)


def transactions_read(*, cluster: Cluster, now_ms: int, open_only: bool = True) -> TransactionsView:
    """The cluster's transactions, oldest first; on a cluster that cannot list them, none and
    the reason."""
    try:
        txns = cluster.list_transactions(open_only=open_only)
    except Unsupported as exc:
        return TransactionsView([], now_ms, str(exc))
    return TransactionsView([TransactionRow(t, now_ms) for t in txns], now_ms)


def transaction_read(*, cluster: Cluster, transactional_id: str, now_ms: int) -> TransactionRow:
    """One transactional id (any state); UnknownTransactionalId if the coordinator has none."""

    for t in cluster.list_transactions(open_only=False):
        if t.transactional_id == transactional_id:
            return TransactionRow(t, now_ms)
    raise UnknownTransactionalId(transactional_id)


def _before(txn: TransactionDescription) -> dict:
    return {
        "producer_id": txn.producer_id,
        "producer_epoch": txn.producer_epoch,
        "state": txn.state,
        "partitions": [f"{t}-{p}" for t, p in txn.partitions],
        "groups": list(txn.groups),
        "start_ms": txn.start_ms,
        "timeout_ms": txn.timeout_ms,
    }


def transaction_abort(
    *,
    cluster: Cluster,
    sink: AuditSink,
    actor: Actor,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    start_ms: int | None = None,
) -> TransactionDescription:
    """Abort the ongoing transaction of `transactional_id` (producer id, epoch and, when given,
    start time as the operator saw them): ABORT markers in its partitions, its producer fenced.
    The coordinator checks what was seen and aborts under one lock, so a transaction that
    moved on since (ended, fenced, or a later one of the same epoch) is refused (audited as
    ``.refused``) and nothing changes. Returns the transaction after the abort."""
    target = f"transactional id {transactional_id}"
    try:
        before = cluster.abort_transaction(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            start_ms=start_ms,
        )
    except InvalidTxnState as exc:
        seen = {"producer_id": producer_id, "producer_epoch": producer_epoch}
        if start_ms is not None:
            seen["start_ms"] = start_ms
        actor.record(
            sink,
            "transaction.abort.refused",
            target,
            before=seen,
            after={"reason": str(exc)},
        )
        raise
    after = next(
        (
            t
            for t in cluster.list_transactions(open_only=False)
            if t.transactional_id == transactional_id
        ),
        None,
    )
    actor.record(
        sink,
        "transaction.abort",
        target,
        before=_before(before),
        after=None
        if after is None
        else {"state": after.state, "producer_epoch": after.producer_epoch},
    )
    return after or before


def stable_offsets_read(*, cluster: Cluster, topic: str) -> list[int] | None:
    """Per partition last stable offset of `topic`; None when the cluster cannot tell."""
    try:
        return cluster.stable_offsets(topic=topic)
    except TidelogError:
        return None
