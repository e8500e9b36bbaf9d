"""The group coordinator: Kafka's classic group membership protocol and committed offsets.

One coordinator serves the Python consumer, the console and (later) the Kafka wire protocol, so
a group joined by any of them is one group.

States and transitions (Kafka's ``ClassicGroupState``)::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable --join / leave / session expiry--> PreparingRebalance
    PreparingRebalance --no member left--> Empty
    Empty --offsets expired / deleted--> Dead

``join_group`` and ``sync_group`` return ``concurrent.futures.Future``s completed when the
rebalance gets there, so a blocking Python consumer and an asyncio network server can both wait
on them. Timeouts (sessions, rebalances, the initial rebalance delay, offset expiry) are driven
by ``tick(now)``, called by a background thread started with ``start()``.

Thread-safety: one lock guards all group state, including the write of offsets to
``__consumer_offsets``; that is what makes "reset only while Empty" hold at commit time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import threading
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future

from streams.errors import (
    GroupNotEmpty,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidSessionTimeout,
    OffsetsChanged,
    RebalanceInProgress,
    UnknownGroup,
    UnknownMemberId,
)
from streams.groups.offsets import CommittedOffset, OffsetStore, TopicPartition
from streams.groups.schemas import (
    Assignment,
    GroupMetadataValue,
    MemberMetadata,
    Subscription,
)
from streams.log import LogStore
from streams.log.store import wall_clock_ms

log = logging.getLogger(__name__)

DEFAULT_OFFSETS_RETENTION_MS = 7 * 24 * 3600 * 1000


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class JoinResult:
    generation: int
    protocol: str
    leader_id: str
    member_id: str
    members: tuple[tuple[str, bytes], ...]  # (member id, metadata): only for the leader

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.member_id


@dataclasses.dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    last_heartbeat_ms: int
    assignment: bytes = b""
    join_future: Future | None = None
    sync_future: Future | None = None

    def metadata_for(self, protocol: str) -> bytes:
        return next(meta for name, meta in self.protocols if name == protocol)


@dataclasses.dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = dataclasses.field(default_factory=dict)
    state_timestamp_ms: int = 0
    rebalance_deadline_ms: int = 0
    initial_delay_until_ms: int = 0
    sync_deadline_ms: int = 0

    def transition(self, state: GroupState, now: int) -> None:
        if state != self.state:
            log.info(
                "group %s: %s -> %s (generation %d)",
                self.group_id,
                self.state,
                state,
                self.generation,
            )
        self.state = state
        self.state_timestamp_ms = now


@dataclasses.dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: dict[str, list[int]]
    subscription: tuple[str, ...]
    # the bytes as the member sent them (DescribeGroups returns these, never a re-encoding):
    # its JoinGroup metadata for the group's protocol, only while the group is Stable, and the
    # assignment the leader gave it (empty until the rebalance completes), as Kafka describes
    # a classic group
    protocol_metadata: bytes = b""
    assignment_bytes: bytes = b""


@dataclasses.dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str | None
    generation: int
    leader_id: str | None
    members: tuple[MemberDescription, ...]
    state_timestamp_ms: int


class GroupCoordinator:
    def __init__(
        self,
        store: LogStore,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        initial_rebalance_delay_ms: int = 0,
        offsets_retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS,
        min_session_timeout_ms: int = 100,
        max_session_timeout_ms: int = 30 * 60 * 1000,
    ):
        self.store = store
        self.clock = clock
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.offsets_retention_ms = offsets_retention_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.offsets = OffsetStore(store)
        self._groups: dict[str, Group] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ================================================================== lifecycle

    def start(self, tick_interval_s: float = 0.05) -> GroupCoordinator:
        """Load committed offsets and group metadata, then start the timer thread."""
        self.load()
        self._thread = threading.Thread(
            target=self._run,
            args=(tick_interval_s,),
            name="tidelog-group-coordinator",
            daemon=True,
        )
        self._thread.start()
        return self

    def load(self) -> None:
        with self._lock:
            self.offsets.load()
            now = self.clock()
            for group_id in self.offsets.groups():
                meta = self.offsets.metadata.get(group_id)
                g = Group(group_id, state_timestamp_ms=now)
                if meta is not None:
                    g.protocol_type = meta.protocol_type
                    g.generation = meta.generation
                    # members do not survive a restart: the group is Empty from now on, or from
                    # when it was last seen Empty
                    g.state_timestamp_ms = meta.state_timestamp if not meta.members else now
                self._groups[group_id] = g

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.tick(self.clock())
            except Exception:  # noqa: BLE001 - keep the timers running
                log.exception("group coordinator tick failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            for g in self._groups.values():
                for m in g.members.values():
                    _fail(m.join_future, RebalanceInProgress("coordinator shutting down"))
                    _fail(m.sync_future, RebalanceInProgress("coordinator shutting down"))

    # ================================================================== membership

    def join_group(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str = "",
        host: str = "",
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        protocol_type: str = "consumer",
        protocols: list[tuple[str, bytes]],
    ) -> Future:
        """JoinGroup: returns a Future of JoinResult, completed when the rebalance completes."""
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            raise InvalidSessionTimeout(
                f"session timeout {session_timeout_ms} ms is outside "
                f"[{self.min_session_timeout_ms}, {self.max_session_timeout_ms}] ms"
            )
        with self._lock:
            now = self.clock()
            g = self._groups.get(group_id)
            if g is None or g.state == GroupState.DEAD:
                g = self._groups[group_id] = Group(group_id, state_timestamp_ms=now)
            if g.members and g.protocol_type and protocol_type != g.protocol_type:
                raise InconsistentGroupProtocol(
                    f"group {group_id!r} uses protocol type {g.protocol_type!r}, "
                    f"not {protocol_type!r}"
                )
            if g.members and not self._common_protocols(g, protocols, skip=member_id):
                raise InconsistentGroupProtocol(
                    f"member protocols {[p for p, _ in protocols]} share none with group "
                    f"{group_id!r}"
                )
            if member_id and member_id not in g.members:
                raise UnknownMemberId(f"member {member_id!r} is not in group {group_id!r}")
            if not member_id:
                member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            fut: Future = Future()
            member = g.members.get(member_id)
            if member is None:
                member = Member(
                    member_id,
                    client_id,
                    host,
                    session_timeout_ms,
                    rebalance_timeout_ms,
                    list(protocols),
                    now,
                )
                g.members[member_id] = member
            else:
                _fail(member.join_future, RebalanceInProgress("superseded by a newer JoinGroup"))
                member.protocols = list(protocols)
                member.session_timeout_ms = session_timeout_ms
                member.rebalance_timeout_ms = rebalance_timeout_ms
            member.join_future = fut
            member.last_heartbeat_ms = now
            g.protocol_type = protocol_type
            if g.state != GroupState.PREPARING_REBALANCE:
                self._prepare_rebalance(g, now, f"member {member_id} joined")
            self._maybe_complete_join(g, now)
            return fut

    @staticmethod
    def _common_protocols(g: Group, protocols, skip: str = "") -> list[str]:
        names = [p for p, _ in protocols]
        for m in g.members.values():
            if m.member_id != skip:
                theirs = {p for p, _ in m.protocols}
                names = [p for p in names if p in theirs]
        return names

    def _prepare_rebalance(self, g: Group, now: int, reason: str) -> None:
        for m in g.members.values():  # a rebalance interrupts a pending sync
            _fail(m.sync_future, RebalanceInProgress(f"group {g.group_id} is rebalancing"))
            m.sync_future = None
        was_empty = g.state == GroupState.EMPTY
        g.transition(GroupState.PREPARING_REBALANCE, now)
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        g.rebalance_deadline_ms = now + timeout
        g.initial_delay_until_ms = now + self.initial_rebalance_delay_ms if was_empty else 0
        log.info("group %s: rebalancing (%s)", g.group_id, reason)

    def _maybe_complete_join(self, g: Group, now: int) -> None:
        if g.state != GroupState.PREPARING_REBALANCE:
            return
        waiting = [m for m in g.members.values() if m.join_future is None]
        if now < g.initial_delay_until_ms:
            return
        if waiting and now < g.rebalance_deadline_ms:
            return
        for m in waiting:  # did not rejoin within the rebalance timeout
            log.info(
                "group %s: removing member %s (did not rejoin in time)", g.group_id, m.member_id
            )
            del g.members[m.member_id]
        g.generation += 1
        if not g.members:
            g.protocol = g.leader_id = None
            g.transition(GroupState.EMPTY, now)
            self._store_group_metadata(g, now)
            return
        candidates = self._common_protocols(g, next(iter(g.members.values())).protocols)
        g.protocol = candidates[0]
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members))
        g.transition(GroupState.COMPLETING_REBALANCE, now)
        g.sync_deadline_ms = now + max(m.rebalance_timeout_ms for m in g.members.values())
        everyone = tuple((m.member_id, m.metadata_for(g.protocol)) for m in g.members.values())
        for m in g.members.values():
            fut, m.join_future = m.join_future, None
            m.assignment = b""
            m.last_heartbeat_ms = now
            result = JoinResult(
                g.generation,
                g.protocol,
                g.leader_id,
                m.member_id,
                everyone if m.member_id == g.leader_id else (),
            )
            if fut is not None and not fut.done():
                fut.set_result(result)

    def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
    ) -> Future:
        """SyncGroup: the leader hands in every member's assignment; each member gets its own."""
        with self._lock:
            g, m = self._member(group_id, member_id)
            if generation != g.generation:
                raise IllegalGeneration(
                    f"generation {generation} is stale; group {group_id!r} is at {g.generation}"
                )
            fut: Future = Future()
            if g.state == GroupState.PREPARING_REBALANCE:
                raise RebalanceInProgress(f"group {group_id!r} is rebalancing; rejoin")
            if g.state == GroupState.STABLE:
                fut.set_result(m.assignment)
                return fut
            m.sync_future = fut
            m.last_heartbeat_ms = self.clock()
            if member_id == g.leader_id:
                assignments = assignments or {}
                for mid, member in g.members.items():
                    member.assignment = assignments.get(mid, b"")
                now = self.clock()
                g.transition(GroupState.STABLE, now)
                self._store_group_metadata(g, now)
                for member in g.members.values():
                    f, member.sync_future = member.sync_future, None
                    if f is not None and not f.done():
                        f.set_result(member.assignment)
            return fut

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> None:
        """Raises RebalanceInProgress when the member must rejoin, as Kafka's error codes do."""
        with self._lock:
            g, m = self._member(group_id, member_id)
            m.last_heartbeat_ms = self.clock()
            if generation != g.generation:
                raise IllegalGeneration(
                    f"generation {generation} is stale; group {group_id!r} is at {g.generation}"
                )
            if g.state == GroupState.PREPARING_REBALANCE:
                raise RebalanceInProgress(f"group {group_id!r} is rebalancing; rejoin")

    def leave_group(self, group_id: str, member_id: str) -> None:
        with self._lock:
            g, m = self._member(group_id, member_id)
            self._remove_member(g, m, self.clock(), "left the group")

    def _remove_member(self, g: Group, m: Member, now: int, why: str) -> None:
        log.info("group %s: member %s %s", g.group_id, m.member_id, why)
        _fail(m.join_future, UnknownMemberId(f"member {m.member_id} {why}"))
        _fail(m.sync_future, UnknownMemberId(f"member {m.member_id} {why}"))
        del g.members[m.member_id]
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, now, f"member {m.member_id} {why}")
        self._maybe_complete_join(g, now)

    def _member(self, group_id: str, member_id: str) -> tuple[Group, Member]:
        g = self._groups.get(group_id)
        if g is None or g.state == GroupState.DEAD:
            raise UnknownMemberId(f"group {group_id!r} has no member {member_id!r}")
        m = g.members.get(member_id)
        if m is None:
            raise UnknownMemberId(f"group {group_id!r} has no member {member_id!r}")
        return g, m

    # ================================================================== timers

    def tick(self, now: int) -> None:
        """Expire sessions, end overdue rebalances, expire offsets of long-Empty groups."""
        with self._lock:
            for g in list(self._groups.values()):
                for m in list(g.members.values()):
                    awaiting_join = m.join_future is not None
                    if not awaiting_join and now - m.last_heartbeat_ms > m.session_timeout_ms:
                        self._remove_member(g, m, now, "missed its session timeout")
                if g.state == GroupState.PREPARING_REBALANCE:
                    self._maybe_complete_join(g, now)
                elif g.state == GroupState.COMPLETING_REBALANCE and now >= g.sync_deadline_ms:
                    laggards = [m for m in g.members.values() if m.sync_future is None]
                    for m in laggards:
                        self._remove_member(g, m, now, "did not sync in time")
            self._expire_offsets(now)

    def _expire_offsets(self, now: int) -> None:
        limit = now - self.offsets_retention_ms
        for g in list(self._groups.values()):
            if g.state != GroupState.EMPTY or g.members:
                continue
            committed = self.offsets.committed(g.group_id)
            if g.protocol_type:  # a consumer group: all offsets expire together
                expired = list(committed) if g.state_timestamp_ms <= limit else []
            else:  # standalone offsets (assign() users, admin commits): one by one
                expired = [tp for tp, c in committed.items() if c.commit_timestamp_ms <= limit]
            if expired:
                log.info("group %s: expiring offsets of %d partitions", g.group_id, len(expired))
                self.offsets.delete_offsets(g.group_id, expired)
            if not self.offsets.committed(g.group_id) and (
                g.protocol_type == "" or g.state_timestamp_ms <= limit
            ):
                self._drop_group(g)

    def _drop_group(self, g: Group) -> None:
        g.transition(GroupState.DEAD, self.clock())
        if g.group_id in self.offsets.metadata or self.offsets.committed(g.group_id):
            self.offsets.delete_group(g.group_id)
        del self._groups[g.group_id]

    def _store_group_metadata(self, g: Group, now: int) -> None:
        members = tuple(
            MemberMetadata(
                m.member_id,
                m.client_id,
                m.host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(g.protocol) if g.protocol else b"",
                m.assignment,
            )
            for m in g.members.values()
        )
        self.offsets.store_metadata(
            g.group_id,
            GroupMetadataValue(
                g.protocol_type,
                g.generation,
                g.protocol,
                g.leader_id,
                g.state_timestamp_ms,
                members,
            ),
        )

    # ================================================================== offsets

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | tuple[int, str]],
        *,
        member_id: str = "",
        generation: int = -1,
        expect: Mapping[TopicPartition, int | None] | None = None,
    ) -> None:
        """OffsetCommit, all partitions in one atomic write.

        `expect` (offset resets): the committed offsets the plan was computed against
        (None: none committed); if any differs, nothing is written (OffsetsChanged).

        Negative offsets are stored as given, as Kafka stores them: KafkaJS's
        ``resetOffsets({earliest: true})`` commits -2 (and latest -1), which its consumers read
        back as "start from the earliest/latest". They are sentinels, not positions: see
        ``committed``.

        generation < 0 (admin tools, offset resets, ``assign()`` users) is accepted only while
        the group is Empty — checked here, under the same lock as membership changes, so a
        consumer that joins meanwhile cannot slip in between check and write. Members must
        name their current generation.
        """
        normalised = {
            tp: (v, "") if isinstance(v, int) else (int(v[0]), v[1]) for tp, v in offsets.items()
        }
        with self._lock:
            now = self.clock()
            g = self._groups.get(group_id)
            if generation < 0:
                if g is not None and g.state not in (GroupState.EMPTY, GroupState.DEAD):
                    raise GroupNotEmpty(group_id, str(g.state), sorted(g.members))
            else:
                g, m = self._member(group_id, member_id)
                if generation != g.generation:
                    raise IllegalGeneration(
                        f"generation {generation} is stale; group {group_id!r} is at "
                        f"{g.generation}: the partitions may belong to another member now"
                    )
                if g.state == GroupState.COMPLETING_REBALANCE:
                    raise RebalanceInProgress(f"group {group_id!r} is completing a rebalance")
                m.last_heartbeat_ms = now
            if expect is not None:
                self._check_expected(group_id, expect)
            if g is None or g.state == GroupState.DEAD:
                g = self._groups[group_id] = Group(group_id, state_timestamp_ms=now)
            # a member's commit may reach disk within flush.ms; an admin commit (a reset) is
            # flushed before it returns
            self.offsets.commit(group_id, normalised, now, durable=generation < 0)

    @contextlib.contextmanager
    def held_if_free(self) -> Iterator[bool]:
        """Hold the coordinator's lock, yielding True, if it is free now (never waited for: a
        rebalance holds it over an fsync), so a short read such as `check_member` can run on
        an event loop; else yield False without it. Calls inside take it again (reentrant)."""
        if not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def held_if_commits_unsynced(self, commits: Mapping[str, int]) -> Iterator[bool]:
        """``held_if_free``, yielding True only if, besides, a non-durable commit of
        `commits` (group -> how many offsets) waits on no disk either (no fdatasync of
        ``__consumer_offsets`` is due under its flush policy): a transaction's commit can
        then write its offsets on an event loop. The lock held keeps it so: every write of
        the offsets topic takes it."""
        with self.held_if_free() as free:
            yield free and all(self.offsets.appends_unsynced(g, n) for g, n in commits.items())

    def check_member(self, group_id: str, member_id: str, generation: int) -> None:
        """A TxnOffsetCommit's member check: `member_id` is in the group at `generation`
        (UnknownMemberId, IllegalGeneration otherwise)."""
        with self._lock:
            g, _ = self._member(group_id, member_id)
            if generation != g.generation:
                raise IllegalGeneration(
                    f"generation {generation} is stale; group {group_id!r} is at "
                    f"{g.generation}: the partitions may belong to another member now"
                )

    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[TopicPartition, tuple[int, str]], durable: bool = True
    ) -> None:
        """The offsets of a committed transaction (``streams.txn``), in one write, on disk
        when this returns if `durable` (else within the offsets topic's flush.ms): they were
        checked when the transaction received them (TxnOffsetCommit), and a transaction that
        committed must not lose them to a rebalance since."""
        with self._lock:
            now = self.clock()
            if group_id not in self._groups or self._groups[group_id].state == GroupState.DEAD:
                self._groups[group_id] = Group(group_id, state_timestamp_ms=now)
            self.offsets.commit(group_id, dict(offsets), now, durable=durable)

    def _check_expected(self, group_id: str, expect: dict[TopicPartition, int | None]) -> None:
        committed = _positions(self.offsets.committed(group_id))
        changed = []
        for (topic, partition), offset in sorted(expect.items()):
            c = committed.get((topic, partition))
            now_at = None if c is None else c.offset
            if now_at != offset:
                changed.append(f"{topic}-{partition}: {offset} -> {now_at}")
        if changed:
            raise OffsetsChanged(group_id, changed)

    def committed(
        self, group_id: str, *, sentinels: bool = False
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets. A negative one (a client's "earliest"/"latest"
        sentinel, see ``commit_offsets``) is no position to measure lag from or resume at: it
        is left out, as if nothing were committed, unless `sentinels` (OffsetFetch returns
        every offset as stored, as Kafka does)."""
        with self._lock:
            committed = self.offsets.committed(group_id)
        return committed if sentinels else _positions(committed)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups: only an Empty group; its offsets and metadata are tombstoned."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                raise UnknownGroup(group_id)
            if g.state != GroupState.EMPTY:
                raise GroupNotEmpty(group_id, str(g.state), sorted(g.members))
            self._drop_group(g)

    def delete_offsets(
        self, group_id: str, topic: str, partitions: Collection[int] | None = None
    ) -> list[TopicPartition]:
        """OffsetDelete for one topic (or some of its partitions): refused while active members
        subscribe to it."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                raise UnknownGroup(group_id)
            if g.members and topic in self._subscribed_topics(g):
                raise GroupNotEmpty(group_id, str(g.state), sorted(g.members))
            doomed = [
                tp
                for tp in self.offsets.committed(group_id)
                if tp[0] == topic and (partitions is None or tp[1] in partitions)
            ]
            self.offsets.delete_offsets(group_id, doomed)
            return doomed

    # ================================================================== describing

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every known group, sorted by id."""
        with self._lock:
            return sorted((g.group_id, str(g.state)) for g in self._groups.values())

    def group_state(self, group_id: str) -> GroupState:
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                raise UnknownGroup(group_id)
            return g.state

    def describe_group(self, group_id: str) -> GroupDescription:
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                raise UnknownGroup(group_id)
            members = tuple(self._describe_member(g, m) for m in g.members.values())
            return GroupDescription(
                g.group_id,
                str(g.state),
                g.protocol_type,
                g.protocol,
                g.generation,
                g.leader_id,
                members,
                g.state_timestamp_ms,
            )

    @staticmethod
    def _describe_member(g: Group, m: Member) -> MemberDescription:
        subscription: tuple[str, ...] = ()
        assignment: dict[str, list[int]] = {}
        if g.protocol_type == "consumer":
            try:
                if m.protocols:
                    chosen = m.metadata_for(g.protocol) if g.protocol else m.protocols[0][1]
                    subscription = Subscription.decode(chosen).topics
                assignment = Assignment.decode(m.assignment).partitions
            except Exception:  # noqa: BLE001 - a foreign client's metadata is shown as unknown
                pass
        metadata = b""
        if g.state == GroupState.STABLE and g.protocol:
            metadata = m.metadata_for(g.protocol)
        return MemberDescription(
            m.member_id, m.client_id, m.host, assignment, subscription, metadata, m.assignment
        )

    def _subscribed_topics(self, g: Group) -> set[str]:
        topics: set[str] = set()
        for m in g.members.values():
            d = self._describe_member(g, m)
            topics |= set(d.subscription) | set(d.assignment)
        return topics

    def groups_reading(self, topic: str) -> list[str]:
        """Groups with committed offsets or members on `topic` (for a topic page)."""
        with self._lock:
            out = []
            for g in self._groups.values():
                committed = self.offsets.committed(g.group_id)
                if any(t == topic for t, _ in committed) or topic in self._subscribed_topics(g):
                    out.append(g.group_id)
            return sorted(out)


def _positions(committed: dict[TopicPartition, CommittedOffset]) -> dict:
    """`committed` without negative (sentinel) offsets."""
    return {tp: c for tp, c in committed.items() if c.offset >= 0}


def _fail(fut: Future | None, exc: Exception) -> None:
    if fut is not None and not fut.done():
        fut.set_exception(exc)
