"""Carrying a previewed reset plan from the preview to the confirm, unchanged.

Why the plan's targets travel with the confirm form (in one signed hidden field) rather than
being re-planned from the same inputs at apply time: on a live topic a re-plan almost never
matches. ``to-latest`` moves with every produced record, ``by-duration`` with the clock,
``to-datetime`` with late records, ``shift-by`` with the committed offset, and ``from-file`` would
need the file uploaded again. Re-planning would either fail spuriously or — worse — apply a plan
nobody looked at. So the confirm carries exactly the rows the user saw (topic, partition, current,
target, ...), signed with the site's secret so that a form edited in the browser cannot commit
offsets that were never previewed, bound to the group and the user, and valid for an hour.

At apply time the service checks that the plan is still what the preview said (``stale_reasons``,
over the group as the request described it once: each description is a round trip on an
external cluster):
every committed offset is still the "current" shown, and every target still lies within the
log's [start, end]. If not, nothing is applied and the user previews again. The Empty rule
itself is left to the coordinator, which checks it under its lock in the same write.
"""

from __future__ import annotations

from django.core import signing

from streams.cluster import Cluster, GroupDetail
from streams.errors import UnknownGroup, UnknownTopic
from streams.groups import ResetPlan, ResetStrategy
from streams.groups.reset import PlanRow

SALT = "tidelog.console.group-reset-plan"
MAX_AGE_S = 3600


class PlanTokenError(Exception):
    """The confirm form's plan cannot be used (tampered, expired, another group or user)."""


def sign_plan(plan: ResetPlan, *, label: str, user_id: int | None) -> str:
    strategy_value = plan.strategy.value if isinstance(plan.strategy.value, int) else None
    payload = {
        "g": plan.group_id,
        "k": plan.strategy.kind,
        "v": strategy_value,
        "l": label,
        "st": plan.group_state,
        "t": plan.created_ms,
        "u": user_id,
        "r": [
            [
                r.topic,
                r.partition,
                r.current,
                r.requested,
                r.target,
                r.log_start_offset,
                r.end_offset,
                r.clamp,
            ]
            for r in plan.rows
        ],
    }
    return signing.dumps(payload, salt=SALT, compress=True)


def load_plan(token: str, *, group_id: str, user_id: int | None) -> tuple[ResetPlan, str]:
    """The plan and its label, exactly as previewed; PlanTokenError when it can't be trusted."""
    try:
        data = signing.loads(token or "", salt=SALT, max_age=MAX_AGE_S)
    except signing.SignatureExpired:
        raise PlanTokenError(
            "this preview is more than an hour old; preview again before applying"
        ) from None
    except signing.BadSignature:
        raise PlanTokenError(
            "the confirmed plan is not one this console previewed (the form was changed or "
            "is damaged); preview again"
        ) from None
    if data.get("g") != group_id:
        raise PlanTokenError("this preview was made for another consumer group; preview again")
    if data.get("u") != user_id:
        raise PlanTokenError("this preview was made by another user; preview again")
    rows = tuple(PlanRow(*row) for row in data["r"])
    value = data["v"]
    if data["k"] == "from-file":
        value = {(r.topic, r.partition): r.requested for r in rows}
    plan = ResetPlan(group_id, ResetStrategy(data["k"], value), rows, data["st"], data["t"])
    return plan, data["l"]


def describe_or_none(cluster: Cluster, group_id: str) -> GroupDetail | None:
    """The group now (one description), None for a group that does not exist (any more)."""
    try:
        return cluster.describe_group(group_id)
    except UnknownGroup:
        return None


def committed_offsets(detail: GroupDetail | None) -> dict[tuple[str, int], int]:
    """The committed offsets of a described group ({} for None: no group)."""
    if detail is None:
        return {}
    return {
        (p.topic, p.partition): p.committed
        for p in detail.lag.partitions
        if p.committed is not None
    }


def current_offsets(cluster: Cluster, group_id: str) -> dict[tuple[str, int], int]:
    """Committed offsets of the group now ({} for a group that no longer exists)."""
    return committed_offsets(describe_or_none(cluster, group_id))


def stale_reasons(cluster: Cluster, plan: ResetPlan, detail: GroupDetail | None) -> list[str]:
    """Why the previewed plan no longer describes the group (`detail`, described just now; None
    when it does not exist) and its logs ([] if it still does)."""
    reasons = []
    committed = committed_offsets(detail)
    bounds: dict[str, list[tuple[int, int]]] = {}  # per topic: (log start, end) by partition
    for r in plan.rows:
        now = committed.get((r.topic, r.partition))
        if now != r.current:
            was = "none" if r.current is None else f"{r.current:,}"
            is_ = "none" if now is None else f"{now:,}"
            reasons.append(
                f"{r.topic}-{r.partition}: the committed offset changed from {was} to {is_}"
            )
        if r.topic not in bounds:
            try:  # offsets only: a topic description reads configs and last records too
                bounds[r.topic] = cluster.partition_offsets(topic=r.topic)
            except UnknownTopic:
                bounds[r.topic] = []
        parts = bounds[r.topic]
        if r.partition >= len(parts):
            reasons.append(f"{r.topic}-{r.partition}: the partition no longer exists")
            continue
        start, end = parts[r.partition]
        if r.target < start:
            reasons.append(
                f"{r.topic}-{r.partition}: the target {r.target:,} is now below the log start "
                f"{start:,} (retention deleted records since the preview)"
            )
        elif r.target > end:
            reasons.append(
                f"{r.topic}-{r.partition}: the target {r.target:,} is now past the log end {end:,}"
            )
    return reasons


def offsets_by_topic(rows, attr: str) -> dict[str, dict[str, int | None]]:
    """{topic: {"partition": offset}} of rows' `attr` (current or target), for the audit log."""
    out: dict[str, dict[str, int | None]] = {}
    for r in rows:
        out.setdefault(r.topic, {})[str(r.partition)] = getattr(r, attr)
    return out
