"""Alerts on consumer groups and topics: rules kept by the broker (`rules`), evaluated in the
broker after every group-health sample (`engine`), delivered to webhooks with retries
(`webhooks`). `Alerts` wires the three together for a `Broker`."""

from __future__ import annotations

from streams.alerts.engine import AlertEngine, RuleState
from streams.alerts.rules import CONDITIONS, FORMATS, SCOPES, AlertRule, RuleStore
from streams.alerts.webhooks import AlertEvent, Delivery, WebhookSender

__all__ = [
    "CONDITIONS",
    "FORMATS",
    "SCOPES",
    "AlertEngine",
    "AlertEvent",
    "AlertRule",
    "Alerts",
    "Delivery",
    "RuleState",
    "RuleStore",
    "WebhookSender",
]


class Alerts:
    """The broker's alerting: its rules, the engine (run after every sample of `monitor`)
    and the webhook sender's thread."""

    def __init__(self, store, monitor, *, sender: WebhookSender | None = None, clock=None):
        self.rules = RuleStore(store)
        self.sender = sender or WebhookSender()
        self.engine = AlertEngine(
            self.rules, monitor, store, self.sender, clock=clock or monitor.clock
        )
        self._monitor = monitor

    def start(self) -> Alerts:
        self.sender.start()
        self._monitor.add_listener(self._evaluate)
        return self

    def _evaluate(self, now_ms: int) -> None:
        self.engine.evaluate(now_ms)

    def close(self) -> None:
        self.sender.close()
