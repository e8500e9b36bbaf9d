"""Alert rules and where the broker keeps them.

A rule watches one consumer group or one topic:

==========  ==================================================  ===============================
condition   true while                                          threshold
==========  ==================================================  ===============================
status      the group's status (Burrow's rules) is this bad     a status: WARN, STALL, STOP…
            or worse; for a topic, any group reading it
lag         the lag, in records, is above the threshold; for    records
            a topic, the largest lag of one group on it
lag_age     the oldest unconsumed record is older than the      seconds
            threshold (for a topic: of any group reading it)
no_input    no record was appended to the topic                 — (``for_s`` is the quiet time)
==========  ==================================================  ===============================

It fires once its condition has held for ``for_s`` seconds (a flapping condition restarts the
count) and resolves when the condition no longer holds; both go to the rule's webhook, as
generic JSON or in Slack's ``{"text": ...}`` shape.

`RuleStore` keeps rules in the compacted internal topic ``__alert_rules`` of the broker's log
store (key: the rule's id, value: its JSON, a tombstone on delete), so they survive restarts
and need nothing but the broker. Thread-safe.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from urllib.parse import urlsplit

from streams.errors import InvalidAlertRule, TopicAlreadyExists, UnknownAlertRule
from streams.groups.evaluator import Status

RULES_TOPIC = "__alert_rules"
RULES_TOPIC_CONFIG = {"cleanup.policy": "compact", "retention.ms": "-1"}

SCOPES = ("group", "topic")
CONDITIONS = ("status", "lag", "lag_age", "no_input")
FORMATS = ("json", "slack")
MAX_FOR_S = 7 * 24 * 3600


@dataclasses.dataclass(frozen=True)
class AlertRule:
    id: str
    name: str
    scope: str  # "group" | "topic"
    target: str  # the group id or the topic name
    condition: str  # see CONDITIONS
    threshold: str  # a status name, a record count or seconds, as text ("" for no_input)
    for_s: int  # how long the condition must hold before the rule fires
    webhook_url: str
    webhook_format: str = "json"  # "json" | "slack"
    enabled: bool = True

    @classmethod
    def new(cls, **fields) -> AlertRule:
        """A rule with a fresh id, validated."""
        return cls(id=uuid.uuid4().hex[:12], **fields).validated()

    def validated(self) -> AlertRule:
        """This rule with its threshold normalised; InvalidAlertRule names what is wrong."""
        if not self.name.strip():
            raise InvalidAlertRule("name", "give the rule a name")
        if self.scope not in SCOPES:
            raise InvalidAlertRule("scope", f"scope must be one of {', '.join(SCOPES)}")
        if not self.target.strip():
            raise InvalidAlertRule("target", f"name the {self.scope} the rule watches")
        if self.condition not in CONDITIONS:
            raise InvalidAlertRule("condition", f"condition must be one of {', '.join(CONDITIONS)}")
        if self.condition == "no_input" and self.scope != "topic":
            raise InvalidAlertRule(
                "condition", "“no records in” watches a topic: choose the topic scope"
            )
        threshold = self._threshold()
        if not isinstance(self.for_s, int) or not 0 <= self.for_s <= MAX_FOR_S:
            raise InvalidAlertRule("for_s", "the duration must be between 0 and 7 days")
        if self.condition == "no_input" and self.for_s < 60:
            raise InvalidAlertRule(
                "for_s", "“no records in” needs a quiet time of 1 minute or more"
            )
        url = urlsplit(self.webhook_url.strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise InvalidAlertRule(
                "webhook_url", "the webhook must be an http:// or https:// URL with a host"
            )
        if self.webhook_format not in FORMATS:
            raise InvalidAlertRule(
                "webhook_format", f"the format must be one of {', '.join(FORMATS)}"
            )
        return dataclasses.replace(
            self,
            name=self.name.strip(),
            target=self.target.strip(),
            threshold=threshold,
            webhook_url=self.webhook_url.strip(),
        )

    def _threshold(self) -> str:
        raw = str(self.threshold).strip()
        if self.condition == "no_input":
            return ""
        if self.condition == "status":
            names = [str(s) for s in Status if s is not Status.OK]
            if raw.upper() not in names:
                raise InvalidAlertRule("threshold", f"the status must be one of {', '.join(names)}")
            return raw.upper()
        unit = "records" if self.condition == "lag" else "seconds"
        try:
            value = int(raw)
        except ValueError:
            raise InvalidAlertRule(
                "threshold", f"the threshold is a whole number of {unit}"
            ) from None
        if value < 0:
            raise InvalidAlertRule("threshold", f"the threshold is 0 {unit} or more")
        return str(value)

    def describe(self) -> str:
        """The rule in words: "group billing: status STALL or worse for 5 min"."""
        if self.condition == "status":
            what = f"status {self.threshold} or worse"
        elif self.condition == "lag":
            what = f"lag above {int(self.threshold):,} records"
        elif self.condition == "lag_age":
            what = f"oldest unconsumed record older than {_span(int(self.threshold))}"
        else:
            what = f"no records in for {_span(self.for_s)}"
        held = f" for {_span(self.for_s)}" if self.for_s and self.condition != "no_input" else ""
        return f"{self.scope} {self.target}: {what}{held}"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> AlertRule:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


def _span(seconds: int) -> str:
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60} min"
    return f"{seconds} s"


class RuleStore:
    """Alert rules in ``__alert_rules`` (compacted), mirrored in memory."""

    def __init__(self, store):
        self._store = store
        self._lock = threading.Lock()
        self._rules: dict[str, AlertRule] = {}
        self._load()

    def _load(self) -> None:
        if RULES_TOPIC not in self._store.list_topics():
            try:
                self._store.create_topic(RULES_TOPIC, 1, dict(RULES_TOPIC_CONFIG))
            except TopicAlreadyExists:
                pass
            return
        start, end = self._store.offsets(RULES_TOPIC, 0)
        offset = start
        while offset < end:
            records = self._store.read(RULES_TOPIC, 0, offset, 500, 4 << 20)
            if not records:
                break
            for r in records:
                rule_id = (r.key or b"").decode()
                if r.value is None:
                    self._rules.pop(rule_id, None)
                    continue
                try:
                    self._rules[rule_id] = AlertRule.from_json(json.loads(r.value))
                except (ValueError, TypeError):
                    continue  # an unreadable rule is skipped, not fatal
            offset = records[-1].offset + 1

    def list(self) -> list[AlertRule]:
        with self._lock:
            return sorted(self._rules.values(), key=lambda r: (r.name.lower(), r.id))

    def get(self, rule_id: str) -> AlertRule:
        with self._lock:
            rule = self._rules.get(rule_id)
        if rule is None:
            raise UnknownAlertRule(rule_id)
        return rule

    def put(self, rule: AlertRule) -> AlertRule:
        """Create or replace the rule with ``rule.id`` (validated first)."""
        rule = rule.validated()
        value = json.dumps(rule.to_json(), separators=(",", ":")).encode()
        with self._lock:
            self._store.append(RULES_TOPIC, value, key=rule.id.encode(), partition=0)
            self._rules[rule.id] = rule
        return rule

    def delete(self, rule_id: str) -> AlertRule:
        with self._lock:
            rule = self._rules.get(rule_id)
            if rule is None:
                raise UnknownAlertRule(rule_id)
            self._store.append(RULES_TOPIC, None, key=rule_id.encode(), partition=0)
            del self._rules[rule_id]
        return rule
