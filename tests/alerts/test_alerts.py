"""Alert rules evaluated against a real store, coordinator and group-health monitor (a
hand-advanced clock), delivered to a real HTTP receiver on a loopback port: firing after N
minutes, resolving, generic JSON and Slack's shape, retries with backoff, bounded give-up."""

from __future__ import annotations

import time

import pytest

from streams.alerts import AlertEngine, AlertRule, RuleStore, WebhookSender
from streams.errors import InvalidAlertRule, UnknownAlertRule
from streams.groups.health import GroupHealthMonitor
from streams.log import LogStore
from tests.alerts.receiver import receiver

SECOND = 1000
MINUTE = 60 * SECOND


@pytest.fixture
def monitor(store, coordinator, clock):
    return GroupHealthMonitor(store, coordinator, clock=clock, min_span_ms=0)


@pytest.fixture
def sender():
    s = WebhookSender(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, timeout_s=5).start()
    yield s
    s.close()


@pytest.fixture
def engine(store, monitor, sender, clock):
    return AlertEngine(RuleStore(store), monitor, store, sender, clock=clock)


def _rule(url, **kw) -> AlertRule:
    fields = dict(
        name="billing stuck",
        scope="group",
        target="billing",
        condition="status",
        threshold="STALL",
        for_s=120,
        webhook_url=url,
    )
    fields.update(kw)
    return AlertRule.new(**fields)


def _stall(store, coordinator, monitor, clock, times=4, group="billing"):
    """The group commits offset 2 again and again while records keep coming."""
    for _ in range(times):
        store.append_batch("orders", [(b"v", None, (), clock.now)] * 3, partition=0)
        coordinator.commit_offsets(group, {("orders", 0): 2})
        monitor.sample()
        clock.advance(30 * SECOND)


def _wait_for(fetch, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not (got := fetch()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def _tick(engine, monitor, stuck=None):
    """One sample and evaluation; `stuck`: the coordinator, to commit billing's offset 2 again
    first (a stalled consumer keeps committing)."""
    if stuck is not None:
        stuck.commit_offsets("billing", {("orders", 0): 2})
    now = monitor.sample()
    return engine.evaluate(now)


def test_a_status_rule_fires_after_its_duration_and_resolves(
    store, coordinator, monitor, engine, clock
):
    store.create_topic("orders", 1)
    with receiver() as hook:
        rule = engine.rules.put(_rule(hook.url))
        _stall(store, coordinator, monitor, clock, times=3)
        assert [
            e.state for e in _tick(engine, monitor, coordinator)
        ] == []  # STALL begins: the clock starts
        clock.advance(MINUTE)
        assert _tick(engine, monitor, coordinator) == []  # 1 of 2 minutes
        assert engine.states()[rule.id].holding and not engine.active()
        clock.advance(MINUTE)
        assert [e.state for e in _tick(engine, monitor, coordinator)] == ["firing"]
        body = hook.next()
        assert body["state"] == "firing" and body["source"] == "tidelog"
        assert body["rule"]["id"] == rule.id and body["rule"]["condition"] == "status"
        assert "webhook_url" not in body["rule"]
        assert "billing is STALL on orders-0" in body["value"]
        assert body["message"].startswith("[Tidelog] FIRING billing stuck — group billing")
        assert body["at"].endswith("Z") and body["since"] < body["at"]
        assert [s.rule.id for s in engine.active()] == [rule.id]
        clock.advance(MINUTE)
        assert _tick(engine, monitor, coordinator) == []  # fires once, not every evaluation

        coordinator.commit_offsets("billing", {("orders", 0): store.offsets("orders", 0)[1]})
        assert [e.state for e in _tick(engine, monitor)] == ["resolved"]
        assert hook.next()["state"] == "resolved"
        assert engine.active() == []


def test_slack_gets_text_only(store, coordinator, monitor, engine, clock):
    store.create_topic("orders", 1)
    with receiver() as hook:
        engine.rules.put(_rule(hook.url, webhook_format="slack", for_s=0))
        _stall(store, coordinator, monitor, clock)
        _tick(engine, monitor)
        body = hook.next()
        assert set(body) == {"text"}
        assert body["text"].startswith("[Tidelog] FIRING billing stuck")
        assert "status STALL or worse" in body["text"]


def test_a_receiver_failing_first_gets_the_alert_on_a_retry(
    store, coordinator, monitor, engine, sender, clock
):
    store.create_topic("orders", 1)
    with receiver(fail_first=2) as hook:
        engine.rules.put(_rule(hook.url, for_s=0))
        _stall(store, coordinator, monitor, clock)
        _tick(engine, monitor)
        assert hook.next()["state"] == "firing"
        assert hook.requests == 3
        [delivery] = _wait_for(sender.deliveries)  # recorded once the answer is read
        assert delivery.delivered and delivery.attempts == 3 and delivery.detail == "HTTP 200"


def test_delivery_gives_up_after_the_last_attempt(sender):
    from streams.alerts import AlertEvent

    with receiver(fail_always=True) as hook:
        event = AlertEvent("r1", "x", {}, "firing", "m", "v", 0, 0, hook.url, "json")
        delivery = sender.deliver(event)
        assert not delivery.delivered and delivery.attempts == 3
        assert delivery.detail == "HTTP 500" and hook.requests == 3
        url = hook.url
    refused = sender.deliver(
        AlertEvent("r1", "x", {}, "firing", "m", "v", 0, 0, url, "json")
    )  # the receiver is gone: connection refused
    assert not refused.delivered and refused.attempts == 3 and "refused" in refused.detail.lower()
    # the backoff doubles and is capped
    assert [sender.delay_s(n) for n in (1, 2, 3, 4)] == [0.01, 0.02, 0.04, 0.05]


def test_lag_count_and_lag_age_rules_on_a_topic(store, coordinator, monitor, engine, clock):
    store.create_topic("orders", 1)
    store.append_batch("orders", [(b"v", None, (), clock.now)] * 50, partition=0)
    coordinator.commit_offsets("billing", {("orders", 0): 45})
    coordinator.commit_offsets("shipping", {("orders", 0): 10})
    with receiver() as hook:
        count = engine.rules.put(
            _rule(
                hook.url,
                name="lag",
                scope="topic",
                target="orders",
                condition="lag",
                threshold="30",
                for_s=0,
            )
        )
        age = engine.rules.put(
            _rule(
                hook.url,
                name="age",
                scope="topic",
                target="orders",
                condition="lag_age",
                threshold="90",
                for_s=0,
            )
        )
        fired = {e.rule_id: e for e in _tick(engine, monitor)}
        assert set(fired) == {count.id}
        assert fired[count.id].value == "lag of shipping on orders: 40 records"
        clock.advance(2 * MINUTE)
        fired = {e.rule_id: e for e in _tick(engine, monitor)}
        assert set(fired) == {age.id}
        assert "shipping (orders-0) is 2 min old" in fired[age.id].value
        assert {hook.next()["rule"]["name"] for _ in range(2)} == {"lag", "age"}


def test_no_records_in_for_n_minutes(store, monitor, engine, clock):
    store.create_topic("orders", 2)
    with receiver() as hook:
        rule = engine.rules.put(
            _rule(
                hook.url,
                name="quiet",
                scope="topic",
                target="orders",
                condition="no_input",
                threshold="",
                for_s=300,
            )
        )
        assert _tick(engine, monitor) == []
        clock.advance(4 * MINUTE)
        store.append("orders", b"v", partition=1)
        assert _tick(engine, monitor) == []
        clock.advance(4 * MINUTE)
        assert _tick(engine, monitor) == []  # 4 min since the last record
        clock.advance(MINUTE)
        [event] = _tick(engine, monitor)
        assert event.state == "firing" and event.value == "no records in for 5 min"
        assert hook.next()["rule"]["id"] == rule.id
        store.append("orders", b"v", partition=0)
        assert [e.state for e in _tick(engine, monitor)] == ["resolved"]


def test_changing_or_deleting_a_rule_forgets_its_state(store, coordinator, monitor, engine, clock):
    store.create_topic("orders", 1)
    with receiver() as hook:
        rule = engine.rules.put(_rule(hook.url, for_s=0))
        _stall(store, coordinator, monitor, clock)
        assert [e.state for e in _tick(engine, monitor)] == ["firing"]
        engine.rules.put(_rule(hook.url, for_s=600).__class__(**{**rule.to_json(), "for_s": 600}))
        assert _tick(engine, monitor) == []  # changed: its clock starts again
        engine.rules.delete(rule.id)
        assert _tick(engine, monitor) == [] and engine.states() == {}
        hook.next()


def test_rules_are_kept_by_the_broker_across_a_restart(tmp_path):
    s = LogStore.open(tmp_path / "d", background=False)
    rules = RuleStore(s)
    a = rules.put(_rule("https://hooks.example/a"))
    b = rules.put(_rule("https://hooks.example/b", name="other"))
    rules.delete(a.id)
    s.close()
    s = LogStore.open(tmp_path / "d", background=False)
    try:
        assert [r.id for r in RuleStore(s).list()] == [b.id]
        with pytest.raises(UnknownAlertRule):
            RuleStore(s).get(a.id)
    finally:
        s.close()


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"name": " "}, "name", "name"),
        ({"scope": "cluster"}, "scope", "group, topic"),
        ({"condition": "cpu"}, "condition", "status, lag"),
        ({"threshold": "FINE"}, "threshold", "WARN, STALL, STOP, REWIND, ERR"),
        ({"condition": "lag", "threshold": "many"}, "threshold", "whole number of records"),
        ({"condition": "lag_age", "threshold": "-1"}, "threshold", "0 seconds or more"),
        ({"condition": "no_input"}, "condition", "topic scope"),
        ({"for_s": -5}, "for_s", "between 0 and 7 days"),
        ({"webhook_url": "file:///etc/passwd"}, "webhook_url", "http:// or https://"),
        ({"webhook_format": "xml"}, "webhook_format", "json, slack"),
    ],
)
def test_bad_rules_are_refused_with_a_clear_reason(change, field, says):
    with pytest.raises(InvalidAlertRule) as e:
        _rule("https://hooks.example/x", **change)
    assert e.value.field == field and says in str(e.value)
