"""Changes to consumer groups: offset reset (plan, apply), group delete, offsets delete.

One function per change, called alike by the console's views, the JSON API and
``manage.py consumer_groups``; each writes one audit record through the `AuditSink` it is given,
with one payload per action (the Kafka port, ``streams.protocol.audit``, writes the same):

=========================  ======================================================================
action                     before / after
=========================  ======================================================================
group.reset                offsets {topic: {partition: current}} /
                           strategy (``ResetStrategy.describe()``), offsets {topic: {p: target}}
group.delete               offsets {topic: {partition: committed}} / None
group.offsets.delete       topic, offsets {topic: {partition: committed}} / topic, offsets None
=========================  ======================================================================

A refusal (the group has members, the plan went stale) is recorded as ``<action>.refused``
with the same before and the reason in after, then raised.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from brokerui.audit.services import Actor, AuditSink
from brokerui.console.groups import plans
from streams.cluster import Cluster, GroupDetail
from streams.errors import GroupError, GroupNotEmpty, TidelogError, UnknownGroup
from streams.groups import ResetPlan, ResetScope, ResetStrategy
from streams.groups.evaluator import Status
from streams.groups.health import GroupHealth
from streams.groups.reset import plan_across_scopes
from streams.jobs.viewserver import is_job_member


class StalePlan(GroupError):
    """The previewed plan no longer describes the group and its logs; nothing was applied.
    `busy`: the group's members, when they are why (their commits moved the offsets).
    A conflict with the group's state (409 in the API), as a group that is not Empty is."""

    code = "stale_plan"

    def __init__(self, group_id: str, reasons: list[str], busy: GroupNotEmpty | None):
        self.group_id, self.reasons, self.busy = group_id, reasons, busy
        super().__init__("the preview is out of date: " + "; ".join(reasons))


def _target(group_id: str) -> str:
    return f"group {group_id}"


def offsets_json(offsets: Mapping[tuple[str, int], int | None]) -> dict[str, dict[str, int | None]]:
    """{topic: {"partition": offset}}: the audit's shape for a group's offsets."""
    out: dict[str, dict[str, int | None]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _member_label(m) -> str:
    who = m.client_id or "(no client id)"
    where = f" on {m.host}" if m.host else ""
    return f"{who}{where} (member id {m.member_id})"


def busy_reason(state: str, members=(), group_id: str | None = None) -> str | None:
    """Why the group's offsets cannot be changed now (None while it is Empty): the one wording
    of the console's reset and delete pages and the API's ``blocked_reason``. Members that are
    workers of the stream job the group is named after (`group_id`) are called so, and how
    to stop them is said."""
    if state in ("Empty", "Dead"):
        return None
    n = len(members)
    who = "; ".join(_member_label(m) for m in members)
    listed = f", with {n} active member{'s' if n != 1 else ''}: {who}" if n else ""
    if group_id is not None and any(is_job_member(group_id, m.client_id) for m in members):
        how = (
            f"its members are workers of the stream job {group_id}: stop the job (an embedded "
            "job on the Jobs page; a worker of python -m streams.jobs run with SIGTERM), reset "
            "its offsets, then start it again to replay."
        )
    else:
        how = "stop its consumers (or wait for their sessions to expire)."
    return (
        f"The group is {state}, not Empty{listed}. Offsets can only be changed while it is "
        f"Empty: {how}"
    )


def not_empty_error(detail: GroupDetail | None) -> GroupNotEmpty | None:
    """GroupNotEmpty naming the described group's state and members, None while it is Empty
    (or gone: None)."""
    if detail is None:
        return None
    desc = detail.description
    if desc.state in ("Empty", "Dead"):
        return None
    return GroupNotEmpty(desc.group_id, desc.state, sorted(m.member_id for m in desc.members))


def group_reset_plan(
    *, cluster: Cluster, group_id: str, strategy: ResetStrategy, scopes: list[ResetScope]
) -> ResetPlan:
    """One plan over every scope (committed in one write); nothing is changed or audited."""

    def plan_one(scope: ResetScope) -> ResetPlan:
        return cluster.plan_reset(group_id=group_id, strategy=strategy, scope=scope)

    return plan_across_scopes(plan_one, strategy, scopes)


def reset_audit_payload(plan: ResetPlan) -> tuple[dict, dict]:
    """The (before, after) of a ``group.reset`` record of `plan`."""
    before = {"offsets": plans.offsets_by_topic(plan.rows, "current")}
    after = {
        "strategy": plan.strategy.describe(),
        "offsets": plans.offsets_by_topic(plan.rows, "target"),
    }
    return before, after


def group_reset_apply(
    *,
    cluster: Cluster,
    sink: AuditSink,
    actor: Actor,
    plan: ResetPlan,
    detail: GroupDetail | None = None,
):
    """Commit exactly `plan`'s targets, if it still describes the group (committed offsets as
    planned, targets within the logs) and the group is Empty; returns the audit entry. Raises
    StalePlan, GroupNotEmpty or another TidelogError, each recorded ``group.reset.refused``.
    `detail`: the group as the caller described it in this request; else it is described here
    (once per request: each description is a round trip on an external cluster)."""
    if detail is None:
        detail = plans.describe_or_none(cluster, plan.group_id)
    return _apply(cluster, sink, actor, plan, detail)


def _apply(cluster: Cluster, sink: AuditSink, actor: Actor, plan: ResetPlan, detail):
    """group_reset_apply on `detail`, the group described just now (None: it does not exist)."""
    target = _target(plan.group_id)
    before, after = reset_audit_payload(plan)
    stale = plans.stale_reasons(cluster, plan, detail)
    try:
        if stale:
            raise StalePlan(plan.group_id, stale, not_empty_error(detail))
        cluster.execute_reset(plan=plan)
    except TidelogError as exc:
        busy = getattr(exc, "busy", None)
        reason = f"{busy}; {exc}" if busy else str(exc)
        actor.record(
            sink, "group.reset.refused", target, before=before, after={**after, "reason": reason}
        )
        raise
    return actor.record(sink, "group.reset", target, before=before, after=after)


@dataclasses.dataclass(frozen=True)
class GroupReset:
    """What `group_reset` did: the plan, whether the group existed before it, and the audit
    entry when the plan was executed (None: a dry run)."""

    plan: ResetPlan
    existed: bool
    entry: Any = None

    @property
    def executed(self) -> bool:
        return self.entry is not None


def group_reset(
    *,
    cluster: Cluster,
    sink: AuditSink,
    actor: Actor,
    group_id: str,
    strategy: ResetStrategy,
    scopes: list[ResetScope],
    execute: bool,
) -> GroupReset:
    """Plan a reset over `scopes` and, when `execute`, apply it at once (as `group_reset_apply`,
    on the same one description of the group): the reset of ``manage.py consumer_groups`` and
    of the JSON API, where preview and confirm are not two requests. A dry run changes and
    audits nothing. Raises as `group_reset_plan` and `group_reset_apply` do."""
    detail = plans.describe_or_none(cluster, group_id)
    plan = group_reset_plan(cluster=cluster, group_id=group_id, strategy=strategy, scopes=scopes)
    entry = _apply(cluster, sink, actor, plan, detail) if execute else None
    return GroupReset(plan, detail is not None, entry)


def group_delete(*, cluster: Cluster, sink: AuditSink, actor: Actor, group_id: str) -> None:
    """Delete an Empty group and its committed offsets. Raises UnknownGroup (not audited) or
    GroupNotEmpty (recorded ``group.delete.refused``)."""
    detail = cluster.describe_group(group_id)  # UnknownGroup
    before = {"offsets": offsets_json(plans.committed_offsets(detail))}
    try:
        cluster.delete_group(group_id=group_id)
    except GroupNotEmpty as exc:
        actor.record(
            sink,
            "group.delete.refused",
            _target(group_id),
            before=before,
            after={"reason": str(exc)},
        )
        raise
    actor.record(sink, "group.delete", _target(group_id), before=before, after=None)


def group_offsets_delete(
    *, cluster: Cluster, sink: AuditSink, actor: Actor, group_id: str, topic: str
) -> list[tuple[str, int]]:
    """Delete the group's committed offsets on `topic`; the partitions deleted ([] when it had
    none: nothing is audited then). Raises UnknownGroup, UnknownTopic (not audited) or
    GroupNotEmpty when active members read the topic (recorded ``.refused``)."""
    detail = cluster.describe_group(group_id)  # UnknownGroup
    offsets = {tp: o for tp, o in plans.committed_offsets(detail).items() if tp[0] == topic}
    before = {"topic": topic, "offsets": offsets_json(offsets)}
    target = _target(group_id)
    try:
        deleted = cluster.delete_group_offsets(group_id=group_id, topic=topic)
    except GroupNotEmpty as exc:
        actor.record(
            sink, "group.offsets.delete.refused", target, before=before, after={"reason": str(exc)}
        )
        raise
    if deleted:
        actor.record(
            sink,
            "group.offsets.delete",
            target,
            before=before,
            after={"topic": topic, "offsets": None},
        )
    return deleted


# ============================================================================ health (reads)


class HealthSource(Protocol):
    """What judges groups: the built-in broker's `GroupHealthMonitor`."""

    def group_health(self, group_id: str, now_ms: int | None = None) -> GroupHealth: ...

    def all_groups(self, now_ms: int | None = None) -> dict[str, GroupHealth]: ...

    @property
    def window(self) -> int: ...

    @property
    def interval_ms(self) -> int: ...


def health_source() -> HealthSource | None:
    """The built-in broker's monitor; None on an external cluster (TIDELOG_CLUSTER), whose
    commits this process does not sample."""
    from brokerui.broker import get_broker
    from brokerui.cluster import is_external

    return None if is_external() else get_broker().health


def group_health_read(*, source: HealthSource | None, group_id: str) -> GroupHealth | None:
    """The group's Burrow status and lag figures; None without a source or for an unknown
    group."""
    if source is None:
        return None
    try:
        return source.group_health(group_id)
    except UnknownGroup:
        return None


def groups_health_read(*, source: HealthSource | None) -> dict[str, GroupHealth]:
    """Every group's health by id ({} without a source)."""
    return source.all_groups() if source is not None else {}


def status_counts(health: dict[str, GroupHealth]) -> list[tuple[str, int]]:
    """(status, groups) for every status some group has, best first."""
    counts: dict[Status, int] = {}
    for h in health.values():
        counts[h.status] = counts.get(h.status, 0) + 1
    return [(str(s), counts[s]) for s in Status if s in counts]
