"""`AlertEngine`: evaluates the alert rules against the broker's group health and topic end
offsets, fires and resolves alerts, and hands each change to the webhook sender.

The broker runs it after every sample of its `GroupHealthMonitor` (every 5 s, on the
monitor's thread). For each enabled rule the engine asks whether its condition holds now; a
condition that holds starts a clock (`since`), and once it has held for the rule's ``for_s``
the alert fires: one "firing" event to the webhook. When the condition stops holding, a firing
alert resolves (one "resolved" event) and a pending one is forgotten. Changing or deleting a
rule forgets its state (a deleted firing rule sends nothing more).

State lives in memory: after a restart, conditions start their clocks again.

Thread-safety: `evaluate` runs on one thread; `active`, `states` and `recent` may be read from
any thread.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

from streams.alerts.rules import AlertRule, RuleStore
from streams.alerts.webhooks import AlertEvent
from streams.errors import UnknownTopic
from streams.groups.evaluator import Status, span_text
from streams.groups.health import GroupHealth

log = logging.getLogger(__name__)


class HealthSource(Protocol):
    def all_groups(self, now_ms: int | None = None) -> dict[str, GroupHealth]: ...


class EndOffsets(Protocol):
    """What the engine reads of the log store: a topic's partitions' end offsets."""

    def partition_count(self, name: str) -> int: ...

    def offsets(self, topic: str, partition: int) -> tuple[int, int]: ...


class Sender(Protocol):
    def send(self, event: AlertEvent) -> None: ...


@dataclasses.dataclass(frozen=True)
class RuleState:
    """Where a rule stands: `holding` since `since_ms` (None: not holding), firing or not."""

    rule: AlertRule
    holding: bool
    since_ms: int | None
    firing: bool
    value: str  # what was measured, in words


@dataclasses.dataclass
class _Track:
    since_ms: int | None = None
    firing: bool = False
    fired_ms: int | None = None
    value: str = ""
    rule: AlertRule | None = None


class AlertEngine:
    def __init__(
        self,
        rules: RuleStore,
        health: HealthSource,
        store: EndOffsets,
        sender: Sender,
        *,
        clock: Callable[[], int],
        history: int = 200,
    ):
        self.rules = rules
        self._health = health
        self._store = store
        self._sender = sender
        self._clock = clock
        self._lock = threading.Lock()
        self._tracks: dict[str, _Track] = {}
        self._events: deque[AlertEvent] = deque(maxlen=history)
        # topic -> (sum of end offsets, when it last changed)
        self._input: dict[str, tuple[int, int]] = {}

    # ------------------------------------------------------------------ evaluating

    def evaluate(self, now_ms: int | None = None) -> list[AlertEvent]:
        """Evaluate every enabled rule once; returns the events sent."""
        now = self._clock() if now_ms is None else now_ms
        rules = [r for r in self.rules.list() if r.enabled]
        health = self._health.all_groups(now) if rules else {}
        self._watch_input(rules, now)
        events = []
        with self._lock:
            for rule_id in set(self._tracks) - {r.id for r in rules}:
                del self._tracks[rule_id]  # deleted or disabled: forgotten, nothing sent
            for rule in rules:
                track = self._tracks.get(rule.id)
                if track is None or track.rule != rule:  # new or changed: start over
                    track = self._tracks[rule.id] = _Track(rule=rule)
                holding, value = self._holds(rule, health, now)
                track.value = value
                if holding:
                    if track.since_ms is None:  # no_input: since the last record came in
                        quiet_since = self._input.get(rule.target, (0, now))[1]
                        track.since_ms = quiet_since if rule.condition == "no_input" else now
                    held = now - track.since_ms
                    need = 0 if rule.condition == "no_input" else rule.for_s * 1000
                    if not track.firing and held >= need:
                        track.firing, track.fired_ms = True, now
                        events.append(self._event(rule, "firing", value, now, track.since_ms))
                else:
                    if track.firing:
                        events.append(self._event(rule, "resolved", value, now, track.since_ms))
                    track.since_ms, track.firing, track.fired_ms = None, False, None
            self._events.extend(events)
        for event in events:
            self._sender.send(event)
        return events

    def _holds(self, rule: AlertRule, health: dict[str, GroupHealth], now: int):
        """(condition holds, what was measured in words)."""
        if rule.condition == "no_input":
            total, changed = self._input.get(rule.target, (None, now))
            if total is None:
                return False, "topic not found"
            quiet = now - changed
            return quiet >= rule.for_s * 1000, f"no records in for {span_text(quiet)}"
        parts = _partitions(rule, health)
        if not parts:
            return False, "nothing to measure (no committed offsets)"
        if rule.condition == "status":
            limit = Status(rule.threshold)
            worst = max(parts, key=lambda p: (p[1].status.rank, p[1].lag or 0))
            group, p = worst
            return p.status.rank >= limit.rank, (
                f"{group} is {p.status} on {p.topic}-{p.partition}: {p.reason}"
            )
        if rule.condition == "lag":
            by_group: dict[str, int] = {}
            for group, p in parts:
                by_group[group] = by_group.get(group, 0) + (p.lag or 0)
            group, lag = max(by_group.items(), key=lambda kv: (kv[1], kv[0]))
            where = f"{group} on {rule.target}" if rule.scope == "topic" else group
            unit = "record" if lag == 1 else "records"
            return lag > int(rule.threshold), f"lag of {where}: {lag:,} {unit}"
        ages = [(p.lag_age_ms or 0, p.lag or 0, group, p) for group, p in parts]
        age, _lag, group, p = max(ages, key=lambda a: a[:2])
        return age > int(rule.threshold) * 1000, (
            f"oldest unconsumed record of {group} ({p.topic}-{p.partition}) is {span_text(age)} old"
        )

    def _watch_input(self, rules: list[AlertRule], now: int) -> None:
        topics = {r.target for r in rules if r.condition == "no_input"}
        for topic in topics:
            try:
                n = self._store.partition_count(topic)
                total = sum(self._store.offsets(topic, p)[1] for p in range(n))
            except UnknownTopic:
                self._input.pop(topic, None)
                continue
            last = self._input.get(topic)
            if last is None or last[0] != total:
                self._input[topic] = (total, now)
        for topic in set(self._input) - topics:
            del self._input[topic]

    def _event(self, rule: AlertRule, state: str, value: str, now: int, since: int | None):
        verb = "FIRING" if state == "firing" else "RESOLVED"
        message = f"[Tidelog] {verb} {rule.name} — {rule.describe()}. Now: {value}."
        about = {k: v for k, v in rule.to_json().items() if not k.startswith("webhook")}
        return AlertEvent(
            rule.id,
            rule.name,
            about,
            state,
            message,
            value,
            now,
            since if since is not None else now,
            rule.webhook_url,
            rule.webhook_format,
        )

    # ------------------------------------------------------------------ reading

    def states(self) -> dict[str, RuleState]:
        """Every evaluated rule's state by rule id."""
        with self._lock:
            return {
                rule_id: RuleState(t.rule, t.since_ms is not None, t.since_ms, t.firing, t.value)
                for rule_id, t in self._tracks.items()
                if t.rule is not None
            }

    def active(self) -> list[RuleState]:
        """The firing alerts, longest-firing first."""
        firing = [s for s in self.states().values() if s.firing]
        return sorted(firing, key=lambda s: (s.since_ms or 0, s.rule.name))

    def recent(self) -> list[AlertEvent]:
        """The latest events, newest first."""
        with self._lock:
            return list(reversed(self._events))


def _partitions(rule: AlertRule, health: dict[str, GroupHealth]):
    """(group, PartitionHealth) the rule watches."""
    if rule.scope == "group":
        h = health.get(rule.target)
        return [(rule.target, p) for p in h.partitions] if h else []
    return [
        (group, p)
        for group, h in sorted(health.items())
        for p in h.partitions
        if p.topic == rule.target
    ]
