"""Transactions on the wire: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn, answered by the broker's
``streams.txn.TransactionCoordinator`` (FindCoordinator with key type 1 names this node), and
the admin APIs ListTransactions, DescribeTransactions and DescribeProducers.

A fenced producer gets PRODUCER_FENCED on the request versions that know it (KIP-588:
InitProducerId v4, AddPartitionsToTxn v2, AddOffsetsToTxn v2, EndTxn v2, TxnOffsetCommit v3)
and INVALID_PRODUCER_EPOCH before, as Kafka answers.

Thread-safety: handlers run on the listener's event loop. A coordinator call may block (on the
coordinator's lock, or an fsync of state records or markers) and then runs through
``BrokerContext.blocking``; AddPartitionsToTxn, AddOffsetsToTxn and a commit's EndTxn run on the
loop itself when they cannot (``TransactionCoordinator.held_if_unblocked``: a relaxed flush
policy, the lock free, nothing of the id pending; for a commit with group offsets, the group
coordinator's lock free too and no fdatasync of ``__consumer_offsets`` due), and so does
TxnOffsetCommit when the group coordinator's lock is free too (for its member check): under
``--flush kafka`` neither a transactional produce nor a consume-transform-produce one makes a
thread-pool round trip (but for the rare commit whose offsets cross the offsets topic's
``flush.messages``, or one that meets a rebalance).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from streams.errors import GroupError, TidelogError, TransactionalProducerFenced
from streams.protocol import codec, fastcodec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import BrokerContext, ErrorCode, domain_error_code
from streams.txn import TxnState

# the first version of each API whose clients understand PRODUCER_FENCED (KIP-588)
_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}
MIN_EPOCH_BUMP_END_TXN = 5  # KIP-890 part 2: EndTxn v5 returns the bumped epoch


async def _call(
    ctx: BrokerContext,
    transactional_id: str,
    fn,
    *args,
    commit: bool | None = None,
    on_loop=None,
):
    """`fn(*args)` on the loop (`on_loop(*args)` if given) if the coordinator says it waits
    on nothing (see the module docstring; `commit`: an EndTxn's), else on the listener's
    thread pool."""
    with ctx.transactions.held_if_unblocked(transactional_id, commit) as unblocked:
        if unblocked:
            return (on_loop or fn)(*args)
    return await ctx.blocking(fn, *args)


def _after_answer(fn: Callable[[], None]) -> None:
    """Run `fn` on the running loop after the answer of the request being handled is
    written: two turns of the loop later, so that the connection's respond task, which the
    answer wakes, runs in between (if answers of earlier requests are still pending, `fn`
    may run first: only the order is not guaranteed, never the outcome)."""
    loop = asyncio.get_running_loop()
    loop.call_soon(loop.call_soon, fn)


def _code(req: Request, exc: TidelogError) -> int:
    if isinstance(exc, TransactionalProducerFenced) and req.api_version < _FENCED_SINCE.get(
        req.api_key, 0
    ):
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return domain_error_code(exc)


async def handle_init_producer_id(ctx: BrokerContext, req: Request) -> Any:
    """InitProducerId with a transactional id (``produce`` answers the idempotent ones)."""
    b = req.body
    pid, epoch = (b.producer_id, b.producer_epoch) if req.api_version >= 3 else (-1, -1)
    try:
        pid, epoch = await ctx.blocking(
            ctx.transactions.init_producer_id,
            b.transactional_id,
            b.transaction_timeout_ms,
            pid,
            epoch,
        )
        code = 0
    except TidelogError as exc:
        pid, epoch, code = -1, -1, _code(req, exc)
    return codec.make_response(
        req, throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch
    )


async def handle_add_partitions_to_txn(ctx: BrokerContext, req: Request) -> Any:
    """AddPartitionsToTxn v0-3 (v4+ is the brokers' batched form, not advertised). Topics
    that do not exist fail the whole request, as Kafka does: UNKNOWN_TOPIC_OR_PARTITION on
    them and OPERATION_NOT_ATTEMPTED (55) on the others."""
    b = req.body
    wanted = [(t.name, p) for t in b.v3_and_below_topics for p in t.partitions]
    errors: dict[tuple[str, int], int] = {}
    for topic, partition in wanted:
        try:
            ctx.store.check_partition(topic, partition)
        except TidelogError as exc:
            errors[(topic, partition)] = domain_error_code(exc)
    if errors:
        code = 55  # OPERATION_NOT_ATTEMPTED
    else:
        try:
            await _call(
                ctx,
                b.v3_and_below_transactional_id,
                ctx.transactions.add_partitions,
                b.v3_and_below_transactional_id,
                b.v3_and_below_producer_id,
                b.v3_and_below_producer_epoch,
                wanted,
            )
            code = 0
        except TidelogError as exc:
            code = _code(req, exc)
    results = [
        (t.name, [(p, errors.get((t.name, p), code)) for p in t.partitions])
        for t in b.v3_and_below_topics
    ]
    # framed here (``fastcodec``: what kafka-python's encoder writes for the same fields)
    return fastcodec.encode_add_partitions_response(req.correlation_id, req.api_version, results)


async def handle_add_offsets_to_txn(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    try:
        await _call(
            ctx,
            b.transactional_id,
            ctx.transactions.add_offsets,
            b.transactional_id,
            b.producer_id,
            b.producer_epoch,
            b.group_id,
        )
        code = 0
    except TidelogError as exc:
        code = _code(req, exc)
    return fastcodec.encode_add_offsets_response(req.correlation_id, req.api_version, code)


async def handle_txn_offset_commit(ctx: BrokerContext, req: Request) -> Any:
    """TxnOffsetCommit: the offsets wait with the transaction and reach the group's committed
    offsets only when it commits. From v3 a member id and generation are checked against the
    group as an OffsetCommit's would be (generation -1: not checked)."""
    b = req.body
    offsets = {
        (t.name, p.partition_index): (p.committed_offset, p.committed_metadata or "")
        for t in b.topics
        for p in t.partitions
    }
    with (
        ctx.transactions.held_if_unblocked(b.transactional_id) as unblocked,
        ctx.coordinator.held_if_free() as groups_free,
    ):
        code = _txn_offset_commit(ctx, req, offsets) if unblocked and groups_free else None
    if code is None:  # one trip to the pool
        code = await ctx.blocking(_txn_offset_commit, ctx, req, offsets)
    topics = [(t.name, [(p.partition_index, code) for p in t.partitions]) for t in b.topics]
    return fastcodec.encode_txn_offset_commit_response(req.correlation_id, req.api_version, topics)


def _txn_offset_commit(ctx: BrokerContext, req: Request, offsets) -> int:
    """The member check, then the staging (blocking); the error code to answer, 0 if none."""
    b = req.body
    if req.api_version >= 3 and b.generation_id >= 0:
        try:
            ctx.coordinator.check_member(b.group_id, b.member_id, b.generation_id)
        except GroupError as exc:
            return domain_error_code(exc)
    try:
        ctx.transactions.txn_offset_commit(
            b.transactional_id, b.producer_id, b.producer_epoch, b.group_id, offsets
        )
    except TidelogError as exc:
        return _code(req, exc)
    return 0


async def handle_end_txn(ctx: BrokerContext, req: Request) -> Any:
    """EndTxn, answered as Kafka's coordinator does once the decision (PrepareCommit or
    PrepareAbort) is on disk; the markers follow from the coordinator's completer thread and
    the producer's next transaction waits for them (CONCURRENT_TRANSACTIONS meanwhile). Under
    a relaxed flush policy nothing waits for the disk: a commit (see the module docstring)
    is answered on the loop, and its markers and offsets are written there right after the
    answer (``_after_answer``), off the client's path; the id's next request waits for them
    as for the completer thread's."""
    b = req.body
    bump = req.api_version >= MIN_EPOCH_BUMP_END_TXN
    try:
        pid, epoch = await _call(
            ctx,
            b.transactional_id,
            functools.partial(ctx.transactions.end_txn, wait_for_markers=False),
            b.transactional_id,
            b.producer_id,
            b.producer_epoch,
            b.committed,
            bump,
            commit=b.committed,
            on_loop=functools.partial(
                ctx.transactions.end_txn, wait_for_markers=False, complete_soon=_after_answer
            ),
        )
        code = 0
    except TidelogError as exc:
        pid, epoch, code = -1, -1, _code(req, exc)
    # framed here (``fastcodec``: what kafka-python's encoder writes for the same fields)
    return fastcodec.encode_end_txn_response(req.correlation_id, req.api_version, code, pid, epoch)


# ---------------------------------------------------------------------- admin

TRANSACTIONAL_ID_NOT_FOUND = 105


async def handle_list_transactions(ctx: BrokerContext, req: Request) -> Any:
    """ListTransactions v0-1 (``kafka-transactions.sh list``): every transactional id the
    coordinator knows, filtered by state names, producer ids and (v1) how long its transaction
    has been running; state names Kafka does not know come back as unknown filters."""
    b = req.body
    known = {s.value for s in TxnState}
    states = set(b.state_filters or ())
    pids = set(b.producer_id_filters or ())
    duration = b.duration_filter if req.api_version >= 1 else -1
    now = ctx.store.clock()
    cls = codec.response_class(req.api_key).TransactionState
    rows = [
        cls(
            transactional_id=t.transactional_id,
            producer_id=t.producer_id,
            transaction_state=t.state,
        )
        for t in ctx.transactions.describe()
        if (not states or t.state in states)
        and (not pids or t.producer_id in pids)
        and (duration < 0 or (t.start_ms >= 0 and now - t.start_ms >= duration))
    ]
    return codec.make_response(
        req,
        throttle_time_ms=0,
        error_code=0,
        unknown_state_filters=sorted(states - known),
        transaction_states=rows,
    )


async def handle_describe_transactions(ctx: BrokerContext, req: Request) -> Any:
    """DescribeTransactions v0 (``kafka-transactions.sh describe``)."""
    by_id = {t.transactional_id: t for t in ctx.transactions.describe()}
    cls = codec.response_class(req.api_key).TransactionState
    rows = []
    for txn_id in req.body.transactional_ids:
        t = by_id.get(txn_id)
        if t is None:
            rows.append(
                cls(
                    error_code=TRANSACTIONAL_ID_NOT_FOUND,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
            continue
        topics: dict[str, list[int]] = {}
        for topic, partition in t.partitions:
            topics.setdefault(topic, []).append(partition)
        rows.append(
            cls(
                error_code=0,
                transactional_id=txn_id,
                transaction_state=t.state,
                transaction_timeout_ms=t.timeout_ms,
                transaction_start_time_ms=t.start_ms,
                producer_id=t.producer_id,
                producer_epoch=t.producer_epoch,
                topics=[cls.TopicData(topic=n, partitions=ps) for n, ps in sorted(topics.items())],
            )
        )
    return codec.make_response(req, throttle_time_ms=0, transaction_states=rows)


async def handle_describe_producers(ctx: BrokerContext, req: Request) -> Any:
    """DescribeProducers v0 (``kafka-transactions.sh describe-producers``): per partition, the
    idempotent and transactional producers it remembers, with the first offset of each one's
    open transaction there (what finds a hanging transaction)."""
    cls = codec.response_class(req.api_key).TopicResponse
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partition_indexes:
            try:
                active = [
                    cls.PartitionResponse.ProducerState(
                        producer_id=s.producer_id,
                        producer_epoch=s.epoch,
                        last_sequence=s.last_sequence,
                        last_timestamp=s.last_timestamp,
                        coordinator_epoch=0,
                        current_txn_start_offset=s.current_txn_start_offset,
                    )
                    for s in ctx.store.describe_producers(t.name, p)
                ]
                code, message = 0, None
            except TidelogError as exc:
                active, code, message = [], domain_error_code(exc), str(exc)
            parts.append(
                cls.PartitionResponse(
                    partition_index=p,
                    error_code=code,
                    error_message=message,
                    active_producers=active,
                )
            )
        topics.append(cls(name=t.name, partitions=parts))
    return codec.make_response(req, throttle_time_ms=0, topics=topics)
