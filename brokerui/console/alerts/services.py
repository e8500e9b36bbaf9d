"""Alert rules: create, update, delete (each audited) and the reads the pages need.

The rules, their evaluation and the webhook deliveries live in the broker
(``streams.alerts.Alerts``); these functions only hand the change over and write one audit
record per change:

====================  =====================================  ==================================
action                before                                 after
====================  =====================================  ==================================
alert_rule.create     None                                   the rule
alert_rule.update     the rule                               the rule
alert_rule.delete     the rule                               None
====================  =====================================  ==================================

A rule's webhook URL is a secret for many receivers (Slack's carries its token in the path),
so the audit shows only its scheme and host.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol
from urllib.parse import urlsplit

from brokerui.audit.services import Actor, AuditSink
from streams.alerts import AlertEngine, AlertRule, Delivery, RuleState, RuleStore


class AlertsBackend(Protocol):
    """What the console needs of the broker's alerting (`streams.alerts.Alerts`)."""

    rules: RuleStore
    engine: AlertEngine

    @property
    def sender(self): ...


def alerts_source() -> AlertsBackend | None:
    """The built-in broker's alerting; None on an external cluster (TIDELOG_CLUSTER), where
    no broker of this process samples the groups."""
    from brokerui.broker import get_broker
    from brokerui.cluster import is_external

    return None if is_external() else get_broker().alerts


def redacted_url(url: str) -> str:
    """scheme://host[:port]/… — the path and query left out (they often hold a token)."""
    parts = urlsplit(url)
    rest = "/…" if (parts.path not in ("", "/") or parts.query) else ""
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}{rest}"


def _audit_json(rule: AlertRule) -> dict:
    data = rule.to_json()
    data["webhook_url"] = redacted_url(rule.webhook_url)
    return data


def _target(rule: AlertRule) -> str:
    return f"alert rule {rule.name} ({rule.id})"


def alert_rule_create(
    *, alerts: AlertsBackend, sink: AuditSink, actor: Actor, fields: dict
) -> AlertRule:
    """A new rule from `fields` (AlertRule's, less the id); InvalidAlertRule when bad."""
    rule = alerts.rules.put(AlertRule.new(**fields))
    actor.record(sink, "alert_rule.create", _target(rule), after=_audit_json(rule))
    return rule


def alert_rule_update(
    *, alerts: AlertsBackend, sink: AuditSink, actor: Actor, rule_id: str, fields: dict
) -> AlertRule:
    before = alerts.rules.get(rule_id)  # UnknownAlertRule
    rule = alerts.rules.put(dataclasses.replace(before, **fields))
    actor.record(
        sink,
        "alert_rule.update",
        _target(rule),
        before=_audit_json(before),
        after=_audit_json(rule),
    )
    return rule


def alert_rule_delete(
    *, alerts: AlertsBackend, sink: AuditSink, actor: Actor, rule_id: str
) -> AlertRule:
    rule = alerts.rules.delete(rule_id)  # UnknownAlertRule
    actor.record(sink, "alert_rule.delete", _target(rule), before=_audit_json(rule))
    return rule


@dataclasses.dataclass(frozen=True)
class RuleRow:
    rule: AlertRule
    state: RuleState | None
    webhook: str  # redacted


@dataclasses.dataclass(frozen=True)
class AlertsOverview:
    rules: list[RuleRow]
    firing: list[RuleState]
    deliveries: list[Delivery]


def alerts_read(*, alerts: AlertsBackend | None) -> AlertsOverview | None:
    """Rules with where each stands, the firing alerts and the latest deliveries."""
    if alerts is None:
        return None
    states = alerts.engine.states()
    rows = [RuleRow(r, states.get(r.id), redacted_url(r.webhook_url)) for r in alerts.rules.list()]
    return AlertsOverview(rows, alerts.engine.active(), alerts.sender.deliveries()[:20])
