"""Consumer group pages: the list, a group's detail (members, per-partition lag), deleting a group
or its offsets on one topic, and the interactive offset reset: form → preview (CSV export) →
confirm → result.

Views stay thin: they read and change groups through the Cluster interface, and every change —
and every refusal of a reset — is written to the audit log. A request describes the group once
(each description is a round trip on an external cluster): what the view read is passed on.
"""

from __future__ import annotations

import re
import time

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from brokerui.access.grants import GROUP
from brokerui.access.services import group_id as group_id_of
from brokerui.access.services import visible_items
from brokerui.audit.services import Actor, process_sink
from brokerui.cluster import get_cluster
from brokerui.console.groups import plans, services
from brokerui.console.groups.forms import DURATION_PRESETS, SCOPES, STRATEGIES, ResetForm
from brokerui.console.roles import is_operator, operator_required
from streams.errors import GroupNotEmpty, TidelogError, UnknownGroup, UnknownTopic
from streams.groups import ResetPlan
from streams.groups.evaluator import MEANING, worst

PAGE_SIZE = 50
POLL_SECONDS = 5


# ============================================================================ helpers


def _partial(request) -> bool:
    """An htmx request for a fragment (not a history restore, which needs the whole page)."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def _render(request, template, context, *, status=200):
    response = render(request, template, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def _redirect(request, url: str):
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _target(group_id: str) -> str:
    return f"group {group_id}"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _busy_reason(desc) -> str | None:
    """Why offsets cannot be changed now (None while the group is Empty)."""
    return services.busy_reason(desc.state, desc.members, desc.group_id)


class _Row:
    """A partition's lag row with its health (None on an external cluster)."""

    def __init__(self, row, health):
        self._row, self.health = row, health

    def __getattr__(self, name):
        return getattr(self._row, name)


def _unknown_group(request, group_id: str):
    return _render(
        request, "console/groups/missing.html", {"nav": "groups", "group_id": group_id}, status=404
    )


# ============================================================================ list


@require_GET
def group_list(request):
    q = request.GET.get("q", "").strip()
    state = request.GET.get("state", "")
    groups = visible_items(request.user, GROUP, get_cluster().list_groups(), name=group_id_of)
    health = services.groups_health_read(source=services.health_source())
    all_states = sorted({g.state for g in groups})
    shown = [
        g
        for g in groups
        if (not q or q.lower() in g.group_id.lower()) and (not state or g.state == state)
    ]
    page = Paginator(shown, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "nav": "groups",
        "page": page,
        "q": q,
        "state": state,
        "all_states": all_states,
        "total": len(groups),
        "total_lag": sum(g.total_lag for g in shown),
        "health": health,
        "poll_seconds": POLL_SECONDS,
    }
    template = (
        "console/groups/partials/table.html" if _partial(request) else "console/groups/list.html"
    )
    return _render(request, template, context)


# ============================================================================ detail


def _detail_context(request, group_id: str) -> dict:
    cluster = get_cluster()
    detail = cluster.describe_group(group_id)  # UnknownGroup: the caller answers 404
    desc = detail.description
    source = services.health_source()
    health = services.group_health_read(source=source, group_id=group_id)
    by_partition = {(h.topic, h.partition): h for h in health.partitions} if health else {}
    lag_only = request.GET.get("lag") == "1"
    consumer = desc.protocol_type in ("consumer", "")
    settled = desc.state == "Stable"

    members = []
    for m in desc.members:
        assigned = sum(len(ps) for ps in m.assignment.values())
        members.append(
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "leader": m.member_id == desc.leader_id,
                "assignment": [
                    (t, ", ".join(str(p) for p in sorted(ps)))
                    for t, ps in sorted(m.assignment.items())
                ],
                "assigned": assigned,
                "subscription": m.subscription,
                # mid-rebalance every member is briefly without partitions: not idle then
                "idle": consumer and settled and assigned == 0,
            }
        )

    by_topic: dict[str, list] = {}
    for p in detail.lag.partitions:
        by_topic.setdefault(p.topic, []).append(p)
    subscribed = {t for m in desc.members for t in m.subscription}
    read_by_members = subscribed | {t for m in desc.members for t in m.assignment}
    topics = []
    for name in sorted(set(by_topic) | subscribed):
        rows = by_topic.get(name, [])
        shown = [r for r in rows if (r.lag or 0) > 0] if lag_only else rows
        judged = [
            by_partition[(name, r.partition)] for r in rows if (name, r.partition) in by_partition
        ]
        topics.append(
            {
                "name": name,
                "rows": [_Row(r, by_partition.get((name, r.partition))) for r in shown],
                "status": worst(h.status for h in judged) if judged else None,
                "partitions": len(rows),
                "hidden": len(rows) - len(shown),
                "committed": sum(1 for r in rows if r.committed is not None),
                "lag": sum(r.lag or 0 for r in rows),
                "end": sum(r.end_offset for r in rows),
                "fallen_behind": sum(1 for r in rows if r.fallen_behind_retention),
                "subscribed": name in subscribed,
                # the coordinator refuses to delete offsets of a topic active members read
                "read_by_members": name in read_by_members,
            }
        )

    query = "?lag=1" if lag_only else ""
    return {
        "nav": "groups",
        "group_id": group_id,
        "desc": desc,
        "members": members,
        "idle_count": sum(1 for m in members if m["idle"]),
        "topics": topics,
        "total_lag": detail.lag.total,
        "health": health,
        "fallen_behind": sum(t["fallen_behind"] for t in topics),
        "lag_only": lag_only,
        "busy_reason": _busy_reason(desc),
        "can_operate": is_operator(request.user),
        "live_url": reverse("console:group", args=[group_id]) + query,
        "poll_seconds": POLL_SECONDS,
        "status_meaning": [(str(s), text) for s, text in MEANING.items()],
        "health_window": source.window if source is not None else None,
        "health_interval_s": source.interval_ms // 1000 if source is not None else None,
    }


@require_GET
def group_detail(request, group_id: str):
    try:
        context = _detail_context(request, group_id)
    except UnknownGroup:
        return _unknown_group(request, group_id)
    template = (
        "console/groups/partials/detail_live.html"
        if _partial(request)
        else "console/groups/detail.html"
    )
    return _render(request, template, context)


# ============================================================================ delete


def _actor(request) -> Actor:
    return Actor(request.user)


@operator_required
@require_POST
def group_delete(request, group_id: str):
    try:
        services.group_delete(
            cluster=get_cluster(), sink=process_sink(), actor=_actor(request), group_id=group_id
        )
    except UnknownGroup as exc:
        messages.error(request, str(exc))
        return _redirect(request, reverse("console:groups"))
    except GroupNotEmpty as exc:
        messages.error(request, f"Not deleted: {exc}")
        return _redirect(request, reverse("console:group", args=[group_id]))
    messages.success(request, f"Deleted consumer group {group_id} and its committed offsets.")
    return _redirect(request, reverse("console:groups"))


@operator_required
@require_POST
def group_delete_offsets(request, group_id: str):
    topic = request.POST.get("topic", "").strip()
    back = reverse("console:group", args=[group_id])
    if not topic:
        messages.error(request, "Choose the topic whose offsets to delete.")
        return _redirect(request, back)
    try:
        deleted = services.group_offsets_delete(
            cluster=get_cluster(),
            sink=process_sink(),
            actor=_actor(request),
            group_id=group_id,
            topic=topic,
        )
    except UnknownGroup as exc:
        messages.error(request, str(exc))
        return _redirect(request, reverse("console:groups"))
    except UnknownTopic as exc:
        messages.error(request, f"Not deleted: {exc}")
        return _redirect(request, back)
    except GroupNotEmpty as exc:
        messages.error(
            request,
            f"Not deleted: active members of the group read {topic}. {exc}",
        )
        return _redirect(request, back)
    if not deleted:
        messages.info(request, f"Group {group_id} had no committed offsets on {topic}.")
        return _redirect(request, back)
    n = len(deleted)
    messages.success(
        request,
        f"Deleted the committed offsets of group {group_id} on {topic} "
        f"({n} partition{'s' if n != 1 else ''}).",
    )
    return _redirect(request, back)


# ============================================================================ reset


def _reset_choices(cluster, detail) -> tuple[list[str], list[dict], list[tuple[str, int]]]:
    """Topics for the "one topic" scope (the group's first), and the group's partitions for the
    "chosen partitions" scope, with their committed and end offsets."""
    desc = detail.description
    committed = {(p.topic, p.partition): p for p in detail.lag.partitions}
    own = sorted(set(detail.lag.topics) | {t for m in desc.members for t in m.subscription})
    others = [t.name for t in cluster.list_topics() if t.name not in own]
    groups, flat = [], []
    for topic in own:
        try:
            parts = cluster.describe_topic(topic).partitions
        except UnknownTopic:
            continue
        rows = []
        for part in parts:
            lag = committed.get((topic, part.partition))
            rows.append(
                {
                    "value": f"{topic}:{part.partition}",
                    "partition": part.partition,
                    "committed": lag.committed if lag else None,
                    "end": part.end_offset,
                }
            )
            flat.append((topic, part.partition))
        groups.append({"topic": topic, "partitions": rows})
    return others, groups, flat


def _reset_form(cluster, detail, data=None, files=None, initial=None) -> tuple[ResetForm, dict]:
    """The form, and what the template needs to draw its choices."""
    others, groups, flat = _reset_choices(cluster, detail)
    topics = [g["topic"] for g in groups] + others
    form = ResetForm(
        data,
        files,
        initial=initial,
        group_id=detail.description.group_id,
        topics=topics,
        partitions=flat,
    )
    choices = {
        "other_topics": others,
        "partition_groups": groups,
        "committed_topics": len(detail.lag.topics),
    }
    return form, choices


def _plan(cluster, group_id: str, data) -> ResetPlan:
    return services.group_reset_plan(
        cluster=cluster,
        group_id=group_id,
        strategy=data["reset_strategy"],
        scopes=data["reset_scopes"],
    )


def _gate(desc, changes: int) -> dict:
    """Whether the apply button is enabled, and if not, why."""
    reason = _busy_reason(desc)
    if reason is None and changes == 0:
        reason = "Nothing to apply: every partition is already at its target."
    return {
        "gate_enabled": reason is None,
        "gate_reason": reason,
        "gate_state": desc.state,
        "gate_members": desc.members,
        "changes": changes,
    }


def _plan_summary(plan: ResetPlan) -> dict:
    rows = plan.rows
    by_topic: dict[str, dict] = {}
    for r in rows:
        t = by_topic.setdefault(
            r.topic, {"topic": r.topic, "partitions": 0, "replay": 0, "skip": 0, "changes": 0}
        )
        t["partitions"] += 1
        t["replay"] += r.to_replay
        t["skip"] += r.to_skip
        t["changes"] += r.changes
    return {
        "partitions": len(rows),
        "changes": sum(1 for r in rows if r.changes),
        "replay": plan.total_replay,
        "skip": plan.total_skip,
        "clamped": sum(1 for r in rows if r.clamp),
        "no_commit": sum(1 for r in rows if r.current is None),
        "topics": list(by_topic.values()),
    }


def _initial(query) -> dict:
    """Defaults for the value fields, pre-scoped from a topic or partition link of the group
    page (``?topic=orders``, ``?topic=orders&partition=2``)."""
    an_hour_ago = time.gmtime(time.time() - 3600)
    initial = {"duration": "PT1H", "datetime": time.strftime("%Y-%m-%dT%H:%M", an_hour_ago)}
    topic, partition = query.get("topic"), query.get("partition")
    if topic and partition is not None and partition.isdigit():
        initial.update(scope="partitions", partitions=[f"{topic}:{partition}"])
    elif topic:
        initial.update(scope="topic", topic=topic)
    return initial


@operator_required
@require_http_methods(["GET", "POST"])
def group_reset(request, group_id: str):
    cluster = get_cluster()
    try:
        detail = cluster.describe_group(group_id)
    except UnknownGroup:
        return _unknown_group(request, group_id)
    desc = detail.description

    if request.method == "GET" and request.GET.get("gate"):
        changes = request.GET.get("changes", "")
        changes = int(changes) if changes.isdigit() else 0
        return _render(
            request,
            "console/groups/partials/reset_gate.html",
            {"group_id": group_id, "state_oob": True, **_gate(desc, changes)},
        )

    context = {
        "nav": "groups",
        "group_id": group_id,
        "desc": desc,
        "busy_reason": _busy_reason(desc),
        "strategies": STRATEGIES,
        "scopes": SCOPES,
        "duration_presets": DURATION_PRESETS,
    }
    if request.method == "POST" and request.POST.get("action") == "apply":
        return _apply(request, cluster, group_id, detail, context)

    if request.method == "POST":
        form, choices = _reset_form(cluster, detail, request.POST, request.FILES)
        context.update(form=form, **choices)
        return _preview(request, cluster, group_id, form, context)

    form, choices = _reset_form(cluster, detail, initial=_initial(request.GET))
    context.update(form=form, **choices)
    return _render(request, "console/groups/reset.html", context)


def _preview(request, cluster, group_id: str, form: ResetForm, context: dict):
    plan = None
    if form.is_valid():
        try:
            plan = _plan(cluster, group_id, form.cleaned_data)
        except TidelogError as exc:  # unknown topic or partition, shift without commit...
            form.add_error(None, str(exc))
            plan = None
    if plan is None:
        context["errors"] = _form_errors(form)
        if _partial(request):
            return _render(request, "console/groups/partials/reset_errors.html", context)
        return _render(request, "console/groups/reset.html", context, status=400)
    label = form.strategy_label()
    context.update(
        plan=plan,
        strategy_label=label,
        scope_label=form.scope_label(),
        token=plans.sign_plan(plan, label=label, user_id=request.user.pk),
        summary=_plan_summary(plan),
        **_gate(context["desc"], sum(1 for r in plan.rows if r.changes)),
    )
    template = (
        "console/groups/partials/reset_preview.html"
        if _partial(request)
        else "console/groups/reset.html"
    )
    return _render(request, template, context)


def _form_errors(form: ResetForm) -> list[tuple[str, str]]:
    labels = {
        "offset": "Offset",
        "shift": "Shift by",
        "datetime": "Date and time",
        "duration": "Duration",
        "file": "File",
        "csv_text": "File",
        "topic": "Topic",
        "partitions": "Partitions",
        "scope": "Scope",
        "strategy": "Strategy",
    }
    out = []
    for field, errors in form.errors.items():
        for e in errors:
            out.append((labels.get(field, ""), e))
    return out


def _apply(request, cluster, group_id: str, detail, context: dict):
    partial = _partial(request)
    result_template = "console/groups/partials/reset_result.html"
    page_template = result_template if partial else "console/groups/reset_done.html"
    try:
        plan, label = plans.load_plan(
            request.POST.get("plan", ""), group_id=group_id, user_id=request.user.pk
        )
    except plans.PlanTokenError as exc:
        context.update(outcome="invalid", message=str(exc))
        return _render(request, page_template, context, status=200 if partial else 400)

    # a refusal shows the state that caused it (the page header too: out of band), from the
    # describe behind the refusal, not the one this request began with
    context.update(plan=plan, strategy_label=label, summary=_plan_summary(plan), state_oob=partial)
    try:
        entry = services.group_reset_apply(
            cluster=cluster, sink=process_sink(), actor=_actor(request), plan=plan, detail=detail
        )
    except services.StalePlan as exc:
        # Not applied. If the group has members now, that is the real obstacle (their commits
        # are what made the preview stale): say so first, as the coordinator would.
        if exc.busy:
            context.update(
                outcome="refused",
                message=str(exc.busy),
                reasons=exc.reasons,
                shown_state=exc.busy.state,
            )
        else:
            context.update(outcome="stale", reasons=exc.reasons)
        return _render(request, page_template, context, status=200 if partial else 409)
    except GroupNotEmpty as exc:
        # The coordinator re-checks Empty under its lock at commit time: a consumer that
        # joined after the preview (or while the page was open) lands here, not in a 500.
        context.update(
            outcome="refused", message=str(exc), members=exc.members, shown_state=exc.state
        )
        return _render(request, page_template, context, status=200 if partial else 409)
    except TidelogError as exc:
        context.update(outcome="error", message=str(exc))
        return _render(request, page_template, context, status=200 if partial else 400)
    context.update(outcome="applied", entry=entry, applied_ms=_now_ms())
    return _render(request, page_template, context)


_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


@operator_required
@require_http_methods(["GET", "POST"])
def group_reset_csv(request, group_id: str):
    """The plan as CSV: POST the previewed plan (exactly what was shown), or GET with the form's
    fields (``?scope=all&strategy=to-earliest``) for a plan computed now, e.g. from a script."""
    cluster = get_cluster()
    if request.method == "POST":
        try:
            plan, _ = plans.load_plan(
                request.POST.get("plan", ""), group_id=group_id, user_id=request.user.pk
            )
        except plans.PlanTokenError as exc:
            return HttpResponse(f"{exc}\n", status=400, content_type="text/plain; charset=utf-8")
    else:
        try:
            detail = cluster.describe_group(group_id)
        except UnknownGroup as exc:
            return HttpResponse(f"{exc}\n", status=404, content_type="text/plain; charset=utf-8")
        form, _ = _reset_form(cluster, detail, request.GET)
        plan = None
        if form.is_valid():
            try:
                plan = _plan(cluster, group_id, form.cleaned_data)
            except TidelogError as exc:
                form.add_error(None, str(exc))
        if plan is None:
            text = "\n".join(f"{f + ': ' if f else ''}{e}" for f, e in _form_errors(form))
            return HttpResponse(text + "\n", status=400, content_type="text/plain; charset=utf-8")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(plan.created_ms / 1000))
    name = _UNSAFE_FILENAME.sub("_", f"{group_id}-reset-{plan.strategy.kind}-{stamp}.csv")
    response = HttpResponse(plan.to_csv(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
