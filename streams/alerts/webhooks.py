"""Delivering alert events to webhooks: an HTTP POST of JSON, generic or Slack-compatible,
retried with exponential backoff a bounded number of times, on a thread of its own so a slow
receiver never holds up the evaluation.

Generic JSON (``format="json"``)::

    {"state": "firing" | "resolved", "rule": {id, name, scope, target, condition, threshold,
     for_s}, "message": "...", "value": "...", "at": "2026-12-01T23:59:00Z",
     "since": "...", "source": "tidelog"}

Slack (``format="slack"``, incoming webhooks and anything that reads Slack's shape)::

    {"text": "..."}

A 2xx answer is delivered; anything else (a non-2xx status, a refused connection, a timeout)
is retried after 0.5 s, 1 s, 2 s, … (doubling, at most `max_delay_s`) up to `max_attempts`
attempts in all, then given up and recorded as failed. The queue holds at most `queue_size`
events: beyond that the oldest waiting one is dropped (and recorded), never the process's
memory. Plain `urllib.request` (the standard library): one POST needs no more, and it adds no
dependency to the broker.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class AlertEvent:
    rule_id: str
    rule_name: str
    rule: dict  # the rule's JSON (without its webhook)
    state: str  # "firing" | "resolved"
    message: str
    value: str  # what was measured, in words
    at_ms: int
    since_ms: int  # when the condition began to hold
    webhook_url: str
    webhook_format: str


@dataclasses.dataclass(frozen=True)
class Delivery:
    """The outcome of delivering one event."""

    rule_id: str
    rule_name: str
    state: str
    url: str
    delivered: bool
    attempts: int
    detail: str  # "HTTP 200", or the last error
    at_ms: int


def payload(event: AlertEvent) -> dict:
    if event.webhook_format == "slack":
        return {"text": event.message}
    return {
        "state": event.state,
        "rule": event.rule,
        "message": event.message,
        "value": event.value,
        "at": _iso(event.at_ms),
        "since": _iso(event.since_ms),
        "source": "tidelog",
    }


def _iso(ms: int) -> str:
    when = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def post_json(url: str, body: dict, timeout_s: float) -> str:
    """POST `body` as JSON; returns "HTTP <status>" for a 2xx, raises otherwise."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "tidelog-alerts"},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - http(s) only, checked by the rule
        return f"HTTP {response.status}"


class WebhookSender:
    def __init__(
        self,
        *,
        max_attempts: int = 5,
        base_delay_s: float = 0.5,
        max_delay_s: float = 30.0,
        timeout_s: float = 5.0,
        queue_size: int = 1000,
        history: int = 100,
        clock: Callable[[], int] | None = None,
    ):
        self.max_attempts = max_attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.timeout_s = timeout_s
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._queue: deque[AlertEvent] = deque()
        self._queue_size = queue_size
        self._done: deque[Delivery] = deque(maxlen=history)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> WebhookSender:
        self._thread = threading.Thread(target=self._run, name="alert-webhooks", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(10)

    def send(self, event: AlertEvent) -> None:
        """Queue `event` for delivery (never blocks)."""
        with self._cond:
            if len(self._queue) >= self._queue_size:
                dropped = self._queue.popleft()
                self._record(dropped, False, 0, "dropped: the delivery queue was full")
            self._queue.append(event)
            self._cond.notify()

    def deliveries(self) -> list[Delivery]:
        """The latest outcomes, newest first."""
        with self._cond:
            return list(reversed(self._done))

    def delay_s(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        return min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait(1.0)
                if self._stop.is_set():
                    return
                event = self._queue.popleft()
            self.deliver(event)

    def deliver(self, event: AlertEvent) -> Delivery:
        """Deliver one event now, retrying; returns (and records) the outcome."""
        body = payload(event)
        detail = ""
        for attempt in range(1, self.max_attempts + 1):
            try:
                detail = post_json(event.webhook_url, body, self.timeout_s)
                return self._record(event, True, attempt, detail)
            except urllib.error.HTTPError as e:
                detail = f"HTTP {e.code}"
            except (urllib.error.URLError, OSError, ValueError) as e:
                detail = str(getattr(e, "reason", e))
            log.info(
                "alerts: webhook %s for rule %s failed (%s), attempt %d of %d",
                event.webhook_url,
                event.rule_id,
                detail,
                attempt,
                self.max_attempts,
            )
            if attempt < self.max_attempts and self._stop.wait(self.delay_s(attempt)):
                break
        log.warning("alerts: gave up on webhook %s: %s", event.webhook_url, detail)
        return self._record(event, False, attempt, detail)

    def _record(self, event: AlertEvent, ok: bool, attempts: int, detail: str) -> Delivery:
        outcome = Delivery(
            event.rule_id,
            event.rule_name,
            event.state,
            event.webhook_url,
            ok,
            attempts,
            detail,
            self._clock(),
        )
        with self._cond:
            self._done.append(outcome)
        return outcome
