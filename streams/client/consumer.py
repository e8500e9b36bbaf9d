"""A consumer with Kafka's API and semantics, over the embedded log store and coordinator.

``subscribe`` (a list or a regex) joins a group: the group's partitions are shared among its
members (load balancing) and every group sees every record (fan-out). ``assign`` takes partitions
by hand, without membership. Offsets are committed per group; what a consumer processed but did
not commit is delivered again after a crash or rebalance (at-least-once).

As in the Java client, a background thread heartbeats; the rebalance itself (revoke with a final
commit, JoinGroup, leader computes the assignment, SyncGroup) runs inside ``poll``.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

from streams.errors import (
    GroupError,
    IllegalGeneration,
    NoOffsetForPartition,
    OffsetOutOfRange,
    RebalanceInProgress,
    StoreClosed,
    TidelogError,
    UnknownMemberId,
)
from streams.groups.assignors import ASSIGNORS
from streams.groups.coordinator import GroupCoordinator, JoinResult
from streams.groups.schemas import Assignment, Subscription
from streams.log import LogStore

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class CommitFailed(TidelogError):
    """The group rebalanced before the commit: these partitions may belong to someone else."""

    code = "commit_failed"


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()


_new_record = tuple.__new__  # skips NamedTuple's Python-level __new__: this is per record


class Consumer:
    def __init__(
        self,
        store: LogStore,
        coordinator: GroupCoordinator | None = None,
        group_id: str | None = None,
        *,
        client_id: str = "tidelog-consumer",
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3000,
        rebalance_timeout_ms: int = 30_000,
        max_poll_records: int = 500,
        assignors: Iterable[str] = ("range", "roundrobin"),
        isolation_level: str = "read_uncommitted",
    ):
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none")
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed")
        # read_committed: up to the last stable offset, never a record of an aborted transaction
        self._committed_only = isolation_level == "read_committed"
        if group_id is not None and coordinator is None:
            raise ValueError("a group_id needs the group coordinator")
        self.store = store
        self.coordinator = coordinator
        self.group_id = group_id
        self.client_id = client_id
        self.host = socket.gethostname()
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.max_poll_records = max_poll_records
        self.assignors = [a for a in assignors if a in ASSIGNORS] or ["range"]
        self._topics: tuple[str, ...] = ()
        self._pattern: re.Pattern | None = None
        self._manual = False
        self._assignment: list[TopicPartition] = []
        self._last_owned: list[TopicPartition] = []  # sent to the sticky assignor on rejoin
        self._positions: dict[TopicPartition, int] = {}
        self._member_id = ""
        self._generation = -1
        self._need_rejoin = False
        self._rr = 0
        self._next_auto_commit = 0.0
        self._lock = threading.RLock()
        self._closed = False
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._async = ThreadPoolExecutor(1, thread_name_prefix="tidelog-commit")
        self.on_assign: Callable[[list[TopicPartition]], None] | None = None
        self.on_revoke: Callable[[list[TopicPartition]], None] | None = None

    # ================================================================== subscription

    def subscribe(self, topics: Iterable[str] = (), pattern: str | None = None) -> None:
        """Join the group for these topics, or for every topic matching `pattern`."""
        if self.group_id is None:
            raise ValueError("subscribe() needs a group_id; use assign() without one")
        with self._lock:
            self._manual = False
            self._pattern = re.compile(pattern) if pattern else None
            self._topics = tuple(sorted(set(topics)))
            self._need_rejoin = True

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read these partitions, outside any group membership."""
        with self._lock:
            if self._member_id:
                self._leave()
            self._manual = True
            self._topics, self._pattern = (), None
            self._set_assignment(sorted(set(partitions)))

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    @property
    def member_id(self) -> str:
        return self._member_id

    @property
    def generation(self) -> int:
        return self._generation

    def _subscribed_topics(self) -> tuple[str, ...]:
        if self._pattern is None:
            return self._topics
        return tuple(
            t for t in self.store.list_topics(include_internal=False) if self._pattern.fullmatch(t)
        )

    # ================================================================== polling

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to `timeout_ms` for some."""
        limit = max_records or self.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            with self._lock:
                if self._closed:
                    raise StoreClosed("the consumer is closed")
                self._ensure_membership()
                self._maybe_auto_commit()
                out = self._fetch(limit)
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(min(0.005, max(0.0, deadline - time.monotonic())))

    def _fetch(self, limit: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        tps = self._assignment
        n = len(tps)
        for i in range(n):
            if len(out) >= limit:
                break
            tp = tps[(self._rr + i) % n]
            position = self._position(tp)
            try:
                recs = self.store.read(
                    tp[0],
                    tp[1],
                    position,
                    max_records=limit - len(out),
                    committed=self._committed_only,
                )
            except OffsetOutOfRange as exc:
                self._positions[tp] = self._reset_position(tp, exc)
                continue
            if not recs:
                # Compaction or retention may have emptied [position, end): move past it. The
                # end is read first and the range read again, so records appended after the
                # empty read above are never taken for an emptied range and skipped.
                _, end = self.store.offsets(*tp, committed=self._committed_only)
                if position < end and not self.store.read(
                    tp[0], tp[1], position, max_records=1, committed=self._committed_only
                ):
                    self._positions[tp] = end
                continue
            topic, partition = tp
            head = (topic, partition)
            out.extend(_new_record(ConsumerRecord, head + r) for r in recs)
            self._positions[tp] = recs[-1].offset + 1
        self._rr = (self._rr + 1) % max(n, 1)
        return out

    def _position(self, tp: TopicPartition) -> int:
        pos = self._positions.get(tp)
        if pos is None:
            committed = self.committed(tp)
            pos = committed if committed is not None else self._reset_position(tp, None)
            self._positions[tp] = pos
        return pos

    def _reset_position(self, tp: TopicPartition, exc: OffsetOutOfRange | None) -> int:
        start, end = self.store.offsets(*tp, committed=self._committed_only)
        if self.auto_offset_reset == "none":
            why = str(exc) if exc else "no committed offset"
            raise NoOffsetForPartition(f"{tp[0]}-{tp[1]}: {why}, and auto.offset.reset is none")
        if exc is not None:
            log.warning("%s-%d: %s; resetting to %s", tp[0], tp[1], exc, self.auto_offset_reset)
        return start if self.auto_offset_reset == "earliest" else end

    # ================================================================== group membership

    def _ensure_membership(self) -> None:
        if self._manual or self.group_id is None or not (self._topics or self._pattern):
            return
        if self._pattern is not None and not self._need_rejoin and self._member_id:
            current = set(self._subscribed_topics())
            subscribed = {t for t, _ in self._assignment}
            if not subscribed <= current:
                self._need_rejoin = True
        if self._member_id and not self._need_rejoin:
            return
        for _ in range(10):  # a rebalance can be interrupted by another; try again
            try:
                self._rejoin()
                return
            except (RebalanceInProgress, IllegalGeneration):
                continue
            except UnknownMemberId:
                self._member_id = ""
        raise RebalanceInProgress(f"could not join group {self.group_id} after 10 attempts")

    def _rejoin(self) -> None:
        assert self.coordinator is not None and self.group_id is not None
        if self._assignment:
            self._revoke()
        topics = self._subscribed_topics()
        owned: dict[str, list[int]] = {}
        for t, p in self._last_owned:
            owned.setdefault(t, []).append(p)
        meta = Subscription(topics, None, owned).encode()
        timeout = (self.rebalance_timeout_ms + self.session_timeout_ms) / 1000
        fut = self.coordinator.join_group(
            self.group_id,
            self._member_id,
            client_id=self.client_id,
            host=self.host,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            protocols=[(name, meta) for name in self.assignors],
        )
        self._start_heartbeats()
        result: JoinResult = fut.result(timeout)
        self._member_id, self._generation = result.member_id, result.generation
        assignments = self._assign_as_leader(result) if result.is_leader else None
        raw = self.coordinator.sync_group(
            self.group_id, result.generation, result.member_id, assignments
        ).result(timeout)
        tps = Assignment.decode(raw).partitions
        self._need_rejoin = False
        self._set_assignment(sorted((t, p) for t, ps in tps.items() for p in ps))
        log.info(
            "%s joined %s generation %d with %s",
            self._member_id,
            self.group_id,
            self._generation,
            self._assignment,
        )

    def _assign_as_leader(self, result: JoinResult) -> dict[str, bytes]:
        subs = {mid: Subscription.decode(meta) for mid, meta in result.members}
        topics = {t for s in subs.values() for t in s.topics}
        known = set(self.store.list_topics())
        counts = {t: self.store.partition_count(t) for t in topics if t in known}
        plan = ASSIGNORS[result.protocol](subs, counts)
        return {mid: Assignment(tps).encode() for mid, tps in plan.items()}

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        self._assignment = tps
        self._last_owned = list(tps)
        self._positions = {tp: pos for tp, pos in self._positions.items() if tp in tps}
        if self.on_assign:
            self.on_assign(list(tps))

    def _revoke(self) -> None:
        revoked = list(self._assignment)
        if self.enable_auto_commit:
            try:
                self._commit_sync(self._current_positions())
            except (CommitFailed, GroupError) as exc:
                log.warning("commit before rebalance failed: %s", exc)
        if self.on_revoke:
            self.on_revoke(revoked)
        self._assignment = []
        self._positions = {}

    def _start_heartbeats(self) -> None:
        if self._heartbeat_thread is not None and self._heartbeat_thread.is_alive():
            return
        self._heartbeat_stop.clear()
        self._heartbeat_thread = threading.Thread(
            target=self._heartbeat_loop, name=f"tidelog-heartbeat-{self.client_id}", daemon=True
        )
        self._heartbeat_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._heartbeat_stop.wait(self.heartbeat_interval_ms / 1000):
            member, generation = self._member_id, self._generation
            if not member or self._need_rejoin:
                continue
            try:
                self.coordinator.heartbeat(self.group_id, generation, member)
            except RebalanceInProgress:
                self._need_rejoin = True
            except IllegalGeneration:
                self._need_rejoin = True
            except UnknownMemberId:
                self._need_rejoin = True
            except Exception:  # noqa: BLE001 - keep heartbeating
                log.exception("heartbeat failed")

    def _stop_heartbeats(self) -> None:
        self._heartbeat_stop.set()
        t = self._heartbeat_thread
        if t is not None and t is not threading.current_thread():
            t.join()
        self._heartbeat_thread = None

    def _leave(self) -> None:
        self._stop_heartbeats()
        if self._member_id and self.coordinator is not None:
            try:
                self.coordinator.leave_group(self.group_id, self._member_id)
            except GroupError:
                pass
        self._member_id, self._generation = "", -1
        self._assignment = []

    # ================================================================== offsets

    def _current_positions(self) -> dict[TopicPartition, int]:
        return {tp: self._positions[tp] for tp in self._assignment if tp in self._positions}

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit `offsets` (default: the position of every assigned partition) and wait."""
        with self._lock:
            self._commit_sync(self._current_positions() if offsets is None else dict(offsets))

    def commit_async(
        self,
        offsets: dict[TopicPartition, int] | None = None,
        callback: Callable[[dict, Exception | None], None] | None = None,
    ) -> Future:
        with self._lock:
            snapshot = self._current_positions() if offsets is None else dict(offsets)

        def run() -> None:
            error = None
            try:
                with self._lock:
                    self._commit_sync(snapshot)
            except Exception as exc:  # noqa: BLE001 - reported to the callback and the Future
                error = exc
            if callback:
                callback(snapshot, error)
            if error:
                raise error

        return self._async.submit(run)

    def _commit_sync(self, offsets: dict[TopicPartition, int]) -> None:
        if self.group_id is None or self.coordinator is None:
            raise ValueError("committing needs a group_id")
        if not offsets:
            return
        try:
            if self._manual or not self._member_id:
                self.coordinator.commit_offsets(self.group_id, offsets)
            else:
                self.coordinator.commit_offsets(
                    self.group_id, offsets, member_id=self._member_id, generation=self._generation
                )
        except (IllegalGeneration, UnknownMemberId, RebalanceInProgress) as exc:
            self._need_rejoin = True
            raise CommitFailed(
                f"commit failed: {exc}. The group rebalanced; the partitions may now belong to "
                "another member, which will process the uncommitted records again"
            ) from exc

    def _maybe_auto_commit(self) -> None:
        if not self.enable_auto_commit or not self._assignment:
            return
        now = time.monotonic()
        if now >= self._next_auto_commit:
            self._next_auto_commit = now + self.auto_commit_interval_ms / 1000
            try:
                self._commit_sync(self._current_positions())
            except (CommitFailed, GroupError) as exc:
                log.info("auto-commit skipped: %s", exc)

    def committed(self, tp: TopicPartition) -> int | None:
        if self.group_id is None or self.coordinator is None:
            return None
        c = self.coordinator.committed(self.group_id).get(tp)
        return None if c is None else c.offset

    def position(self, tp: TopicPartition) -> int:
        with self._lock:
            if tp not in self._assignment:
                raise ValueError(f"{tp} is not assigned to this consumer")
            return self._position(tp)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            if tp not in self._assignment:
                raise ValueError(f"{tp} is not assigned to this consumer")
            self._positions[tp] = offset

    def seek_to_beginning(self, tps: Iterable[TopicPartition] | None = None) -> None:
        with self._lock:
            for tp in self._assignment if tps is None else tps:
                self.seek(tp, self.store.offsets(*tp)[0])

    def seek_to_end(self, tps: Iterable[TopicPartition] | None = None) -> None:
        with self._lock:
            for tp in self._assignment if tps is None else tps:
                self.seek(tp, self.store.offsets(*tp, committed=self._committed_only)[1])

    # ================================================================== closing

    def close(self, autocommit: bool = True) -> None:
        """Commit (when auto-commit is on) and leave the group, so it rebalances at once."""
        with self._lock:
            if self._closed:
                return
            if autocommit and self.enable_auto_commit and self._assignment:
                try:
                    self._commit_sync(self._current_positions())
                except (CommitFailed, GroupError) as exc:
                    log.warning("final commit failed: %s", exc)
            self._leave()
            self._closed = True
        self._async.shutdown(wait=True)

    def abandon(self) -> None:
        """Stop without committing or leaving, as a crashed process would (for tests and
        failure drills): the coordinator notices only when the session times out."""
        self._stop_heartbeats()
        self._closed = True
        self._async.shutdown(wait=False)
