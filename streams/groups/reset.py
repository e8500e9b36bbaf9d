"""Offset reset plans, with the semantics of ``kafka-consumer-groups.sh --reset-offsets``.

A reset is computed first (``plan_reset``) and shown — per partition the current committed
offset, the target, whether and why the target was clamped into [log start, log end], and how
many records will be replayed or skipped — then executed (``execute_plan``), which commits every
partition of the plan in one atomic write and only while the group is Empty (the coordinator
enforces that at commit time).

Strategies::

    to-earliest      the log start offset
    to-latest        the log end offset (high watermark)
    to-current       the committed offset; partitions without one use the log end (as Kafka)
    to-offset N      N
    shift-by N       committed + N (N may be negative); needs a committed offset
    to-datetime T    the first offset with timestamp >= T (ISO-8601, or epoch ms); none: the
                     log end
    by-duration D    to-datetime (now - D), D in ISO-8601 (PT1H, P1DT12H, PT-30M...)
    from-file F      CSV lines ``topic,partition,offset``

Every target is clamped into [log start, log end] as Kafka's tool does, and the clamp is shown.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import re
from collections.abc import Callable, Sequence

from streams.errors import InvalidResetSpec, UnknownPartition, UnknownTopic
from streams.groups.coordinator import GroupCoordinator
from streams.groups.reader import GroupReader
from streams.log.reader import LogReader
from streams.log.store import wall_clock_ms

STRATEGIES = (
    "to-earliest",
    "to-latest",
    "to-current",
    "to-offset",
    "shift-by",
    "to-datetime",
    "by-duration",
    "from-file",
)
NEEDS_VALUE = {"to-offset", "shift-by", "to-datetime", "by-duration", "from-file"}
# the moments a to-datetime may name: those a datetime holds (years 1 to 9999, UTC), in ms
MIN_DATETIME_MS = -62_135_596_800_000  # 0001-01-01T00:00:00.000Z
MAX_DATETIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _digits(n: int) -> str:
    text = str(n)
    return text if len(text) <= 24 else f"{text[:20]}… ({len(text)} digits)"


@dataclasses.dataclass(frozen=True)
class ResetStrategy:
    kind: str
    value: object = None  # int for to-offset/shift-by, ms for to-datetime/by-duration, dict file

    def __post_init__(self) -> None:
        """Every way of building a strategy (command line, console form, API) ends here, so a
        moment or duration no clock can hold is refused here, once, as bad input."""
        if not isinstance(self.value, int):
            return
        if self.kind == "to-datetime" and not MIN_DATETIME_MS <= self.value <= MAX_DATETIME_MS:
            raise InvalidResetSpec(
                f"--to-datetime {_digits(self.value)} ms is out of range: give a moment between "
                "0001-01-01 and 9999-12-31 (UTC)"
            )
        if self.kind == "by-duration" and abs(self.value) > MAX_DATETIME_MS - MIN_DATETIME_MS:
            raise InvalidResetSpec(
                f"--by-duration {_digits(self.value)} ms is out of range: at most 10,000 years "
                "either way"
            )

    @classmethod
    def parse(cls, kind: str, value: str | None = None) -> ResetStrategy:
        """Build a strategy from user text, with an error that says what was expected."""
        kind = kind.strip().lower().removeprefix("--")
        if kind not in STRATEGIES:
            raise InvalidResetSpec(
                f"unknown reset strategy {kind!r}; use one of {', '.join(STRATEGIES)}"
            )
        if kind not in NEEDS_VALUE:
            return cls(kind)
        if value is None or str(value).strip() == "":
            raise InvalidResetSpec(f"--{kind} needs a value")
        value = str(value).strip()
        if kind in ("to-offset", "shift-by"):
            try:
                n = int(value)
            except ValueError:
                raise InvalidResetSpec(f"--{kind} needs a whole number, got {value!r}") from None
            if kind == "to-offset" and n < 0:
                raise InvalidResetSpec(f"--to-offset must be >= 0, got {n}")
            return cls(kind, n)
        if kind == "to-datetime":
            return cls(kind, parse_datetime_ms(value))
        if kind == "by-duration":
            return cls(kind, parse_duration_ms(value))
        try:  # a path: the command line's --from-file (the web passes content: from_csv)
            with open(value, encoding="utf-8") as f:
                return cls.from_csv(f.read())
        except OSError as exc:
            raise InvalidResetSpec(f"cannot read {value}: {exc.strerror}") from None

    @classmethod
    def from_csv(cls, text: str) -> ResetStrategy:
        """from-file with the file's content (uploads): never opens a path."""
        return cls("from-file", parse_offsets_csv(text))

    def describe(self) -> str:
        if self.kind == "to-datetime":
            when = _EPOCH + dt.timedelta(milliseconds=self.value)  # type: ignore[arg-type]
            return f"to-datetime {when.isoformat(timespec='milliseconds')}"
        if self.kind == "by-duration":
            return f"by-duration {self.value} ms"
        if self.kind == "from-file":
            return f"from-file ({len(self.value)} partitions)"  # type: ignore[arg-type]
        return self.kind if self.value is None else f"{self.kind} {self.value}"


@dataclasses.dataclass(frozen=True)
class ResetScope:
    """all_topics, or one topic (optionally some partitions), or explicit partitions."""

    all_topics: bool = False
    topic: str | None = None
    partitions: tuple[int, ...] = ()

    @classmethod
    def parse_topic(cls, spec: str) -> ResetScope:
        """Kafka's ``--topic T`` or ``--topic T:0,1,2``."""
        topic, _, parts = spec.partition(":")
        if not topic:
            raise InvalidResetSpec("--topic needs a topic name")
        try:
            partitions = tuple(int(p) for p in parts.split(",") if p.strip()) if parts else ()
        except ValueError:
            raise InvalidResetSpec(f"bad partition list in {spec!r}; use T:0,1,2") from None
        return cls(topic=topic, partitions=partitions)


@dataclasses.dataclass(frozen=True)
class PlanRow:
    topic: str
    partition: int
    current: int | None
    requested: int
    target: int
    log_start_offset: int
    end_offset: int
    clamp: str | None  # why the requested offset was moved, or None

    @property
    def to_replay(self) -> int:
        """Records consumed again (target below the current offset)."""
        if self.current is None:
            return 0
        return max(0, self.current - self.target)

    @property
    def to_skip(self) -> int:
        """Records never consumed (target above the current offset)."""
        if self.current is None:
            return 0
        return max(0, self.target - max(self.current, self.log_start_offset))

    @property
    def changes(self) -> bool:
        return self.current != self.target


@dataclasses.dataclass(frozen=True)
class ResetPlan:
    group_id: str
    strategy: ResetStrategy
    rows: tuple[PlanRow, ...]
    group_state: str
    created_ms: int

    @property
    def total_replay(self) -> int:
        return sum(r.to_replay for r in self.rows)

    @property
    def total_skip(self) -> int:
        return sum(r.to_skip for r in self.rows)

    def to_csv(self) -> str:
        """The plan as CSV; topic, partition and new offset come first, so the file is valid
        input for from-file (``parse_offsets_csv`` reads those three columns)."""
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(
            [
                "topic",
                "partition",
                "new_offset",
                "current_offset",
                "log_start_offset",
                "log_end_offset",
                "records_to_replay",
                "records_to_skip",
                "clamped",
            ]
        )
        for r in self.rows:
            w.writerow(
                [
                    r.topic,
                    r.partition,
                    r.target,
                    "" if r.current is None else r.current,
                    r.log_start_offset,
                    r.end_offset,
                    r.to_replay,
                    r.to_skip,
                    r.clamp or "",
                ]
            )
        return out.getvalue()

    def as_offsets(self) -> dict[tuple[str, int], int]:
        return {(r.topic, r.partition): r.target for r in self.rows}


def plan_reset(
    coordinator: GroupReader,
    store: LogReader,
    group_id: str,
    strategy: ResetStrategy,
    scope: ResetScope,
    *,
    clock: Callable[[], int] = wall_clock_ms,
) -> ResetPlan:
    """Compute (never apply) a reset plan. A group with no history is allowed, as in Kafka."""
    committed = coordinator.committed(group_id)
    try:
        state = str(coordinator.group_state(group_id))
    except Exception:  # noqa: BLE001 - unknown group: resetting creates its offsets
        state = "Empty"
    now = clock()
    rows = []
    for topic, partition in _partitions_in_scope(store, committed, strategy, scope):
        start, end = store.offsets(topic, partition)
        c = committed.get((topic, partition))
        current = c.offset if c else None
        requested = _requested(store, strategy, topic, partition, current, start, end, now)
        target, clamp = _clamp(requested, start, end)
        rows.append(PlanRow(topic, partition, current, requested, target, start, end, clamp))
    return ResetPlan(group_id, strategy, tuple(rows), state, now)


def merge_plans(plans: Sequence[ResetPlan]) -> ResetPlan:
    """One plan over several scopes' plans (so it is committed in one atomic write): each
    partition once (its row from the first plan naming it), rows ordered by topic and partition;
    strategy, group state and time of the last plan."""
    if not plans:
        raise InvalidResetSpec("choose a scope: --all-topics or --topic T[:P,P...]")
    rows: dict[tuple[str, int], PlanRow] = {}
    for plan in plans:
        for r in plan.rows:
            rows.setdefault((r.topic, r.partition), r)
    last = plans[-1]
    return dataclasses.replace(last, rows=tuple(rows[tp] for tp in sorted(rows)))


def plan_across_scopes(
    plan_one: Callable[[ResetScope], ResetPlan],
    strategy: ResetStrategy,
    scopes: Sequence[ResetScope],
) -> ResetPlan:
    """The plan of `strategy` over every scope, `plan_one(scope)` planning one (a Cluster's
    ``plan_reset`` or `plan_reset` bound to a store). from-file plans the partitions the file
    names, kept to those in the scopes unless one of them is all topics (or there is none)."""
    if strategy.kind == "from-file":
        plan = plan_one(ResetScope(all_topics=True))
        named = [s for s in scopes if not s.all_topics and s.topic]
        if not named or len(named) < len(scopes):
            return plan
        rows = [r for r in plan.rows if any(in_scope(r.topic, r.partition, s) for s in named)]
        if not rows:
            raise InvalidResetSpec("the offsets file names no partition of the chosen topic(s)")
        return dataclasses.replace(plan, rows=tuple(rows))
    return merge_plans([plan_one(s) for s in scopes])


def in_scope(topic: str, partition: int, scope: ResetScope) -> bool:
    if scope.all_topics:
        return True
    return topic == scope.topic and (not scope.partitions or partition in scope.partitions)


def execute_plan(coordinator: GroupCoordinator, plan: ResetPlan) -> None:
    """Commit every row of the plan atomically — exactly the plan that was previewed: the
    coordinator refuses (OffsetsChanged) if a committed offset moved since, and GroupNotEmpty
    if the group has members, both checked under its lock at commit time."""
    coordinator.commit_offsets(
        plan.group_id,
        plan.as_offsets(),
        expect={(r.topic, r.partition): r.current for r in plan.rows},
    )


def _partitions_in_scope(store, committed, strategy, scope) -> list[tuple[str, int]]:
    if strategy.kind == "from-file":
        tps = sorted(strategy.value)
    elif scope.all_topics:
        known = set(store.list_topics())
        # offsets left behind by deleted topics cannot be reset: they are skipped
        tps = sorted(tp for tp in committed if tp[0] in known)
        if not committed:
            raise InvalidResetSpec(
                "the group has no committed offsets; name a --topic instead of --all-topics"
            )
    elif scope.topic:
        count = store.partition_count(scope.topic)
        parts = scope.partitions or tuple(range(count))
        tps = [(scope.topic, p) for p in parts]
    else:
        raise InvalidResetSpec("choose a scope: --all-topics or --topic T[:P,P...]")
    for topic, partition in tps:
        count = store.partition_count(topic)  # raises UnknownTopic
        if not 0 <= partition < count:
            raise UnknownPartition(topic, partition, count)
    return tps


def _requested(store, strategy, topic, partition, current, start, end, now) -> int:
    kind = strategy.kind
    if kind == "to-earliest":
        return start
    if kind == "to-latest":
        return end
    if kind == "to-current":
        return end if current is None else current
    if kind == "to-offset":
        return strategy.value
    if kind == "shift-by":
        if current is None:
            raise InvalidResetSpec(
                f"{topic}-{partition} has no committed offset to shift from; "
                "use --to-offset, --to-earliest or --to-latest for it"
            )
        return current + strategy.value
    if kind in ("to-datetime", "by-duration"):
        ts = strategy.value if kind == "to-datetime" else now - strategy.value
        found = store.offset_for_timestamp(topic, partition, ts)
        return end if found is None else found
    if kind == "from-file":
        return strategy.value[(topic, partition)]
    raise InvalidResetSpec(f"unknown strategy {kind}")


def _clamp(requested: int, start: int, end: int) -> tuple[int, str | None]:
    if requested < start:
        return start, f"{requested} is below the log start offset {start}"
    if requested > end:
        return end, f"{requested} is past the log end offset {end}"
    return requested, None


# --------------------------------------------------------------------------- parsing

_DURATION = re.compile(
    r"^(?P<sign>[-+]?)P(?:(?P<d>[-+]?\d+)D)?"
    r"(?:T(?:(?P<h>[-+]?\d+)H)?(?:(?P<m>[-+]?\d+)M)?(?:(?P<s>[-+]?\d+)(?:[.,](?P<f>\d{0,9}))?S)?)?$",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """ISO-8601 duration as Java's ``Duration.parse`` accepts it: PnDTnHnMn.nS."""
    m = _DURATION.match(text.strip())
    if not m or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise InvalidResetSpec(
            f"{text!r} is not an ISO-8601 duration; examples: PT1H, P1D, PT30M, P1DT12H"
        )
    g = m.groupdict()
    try:
        ms = (int(g["d"] or 0) * 86_400 + int(g["h"] or 0) * 3600 + int(g["m"] or 0) * 60) * 1000
        if g["s"]:
            # exact integers: a float of many digits is inf, and round(inf) raises
            fraction = round(int((g["f"] or "0").ljust(9, "0")[:9]) / 1_000_000)
            ms += int(g["s"]) * 1000 + (-fraction if g["s"].startswith("-") else fraction)
    except ValueError:  # more digits than int() converts
        raise InvalidResetSpec(f"{text[:40]!r}… is not a duration Tidelog can hold") from None
    return -ms if g["sign"] == "-" else ms


def parse_datetime_ms(text: str) -> int:
    """Kafka's ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (Z, +02:00); no zone: UTC.
    Digits alone are epoch milliseconds (as the JSON API takes them)."""
    value = text.strip().replace(" ", "T")
    if re.fullmatch(r"[-+]?\d+", value):
        try:
            return int(value)
        except ValueError:  # more digits than int() converts
            raise InvalidResetSpec(f"{value[:40]}… ms is not a moment Tidelog can hold") from None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidResetSpec(
            f"{text!r} is not a date-time; use YYYY-MM-DDTHH:mm:SS.sss, optionally with a "
            "zone such as Z or +02:00"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - _EPOCH) // dt.timedelta(milliseconds=1)  # exact: no float rounding


def parse_offsets_csv(text: str) -> dict[tuple[str, int], int]:
    """``topic,partition,offset`` lines, as ``kafka-consumer-groups.sh --from-file`` reads."""
    out: dict[tuple[str, int], int] = {}
    for n, row in enumerate(csv.reader(text.splitlines()), 1):
        if not row or not "".join(row).strip() or row[0].startswith("#"):
            continue
        if n == 1 and row[0].strip().lower() == "topic":
            continue  # a header line
        if len(row) < 3:
            raise InvalidResetSpec(f"line {n}: expected topic,partition,offset")
        try:
            out[(row[0].strip(), int(row[1]))] = int(row[2])
        except ValueError:
            raise InvalidResetSpec(f"line {n}: partition and offset must be numbers") from None
    if not out:
        raise InvalidResetSpec("the offsets file has no topic,partition,offset lines")
    return out


__all__ = [
    "ResetPlan",
    "ResetScope",
    "ResetStrategy",
    "PlanRow",
    "plan_reset",
    "execute_plan",
    "parse_duration_ms",
    "parse_datetime_ms",
    "parse_offsets_csv",
    "UnknownTopic",
]
