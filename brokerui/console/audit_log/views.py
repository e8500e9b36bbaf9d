"""The audit log page: every change, newest first, filtered by action prefix and user."""

from __future__ import annotations

import json

from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from brokerui.audit.models import AuditEntry

PAGE_SIZE = 50
SHORT_JSON = 160  # characters of compact JSON shown in the table; the rest behind "more"


def _json_view(value) -> dict | None:
    """Compact one-line JSON for the table, and an indented version for the details."""
    if value is None:
        return None
    compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    long = len(compact) > SHORT_JSON
    return {
        "short": compact[: SHORT_JSON - 1] + "…" if long else compact,
        "full": json.dumps(value, ensure_ascii=False, indent=2, default=str) if long else "",
        "long": long,
    }


def _target_link(target: str) -> tuple[str, str] | None:
    """("group", id) / ("topic", name) for targets written as "group X" / "topic X"."""
    kind, _, name = target.partition(" ")
    if kind in ("group", "topic") and name:
        return kind, name
    return None


def _prefixes(actions: list[str]) -> list[str]:
    """ "group." for group.reset, group.delete...; then every action itself."""
    heads = sorted({a.split(".", 1)[0] + "." for a in actions if "." in a})
    return heads + [a for a in actions if a not in heads]


@require_GET
def audit_list(request):
    action = request.GET.get("action", "").strip()
    username = request.GET.get("user", "").strip()
    entries = AuditEntry.objects.all()
    if action:
        entries = entries.filter(action__startswith=action)
    if username:
        entries = entries.filter(username=username)
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = []
    for e in page:
        link = _target_link(e.target)
        rows.append(
            {
                "entry": e,
                "before": _json_view(e.before),
                "after": _json_view(e.after),
                "link_kind": link[0] if link else "",
                "link_name": link[1] if link else "",
            }
        )
    # order_by() replaces the model's ordering, which would otherwise defeat DISTINCT
    actions = list(
        AuditEntry.objects.order_by("action").values_list("action", flat=True).distinct()
    )
    users = list(
        AuditEntry.objects.order_by("username").values_list("username", flat=True).distinct()
    )
    context = {
        "nav": "audit",
        "page": page,
        "rows": rows,
        "action": action,
        "user_filter": username,
        "action_choices": _prefixes(actions),
        "user_choices": users,
    }
    partial = request.htmx and not request.htmx.history_restore_request
    template = "console/audit/partials/table.html" if partial else "console/audit/list.html"
    response = render(request, template, context)
    patch_vary_headers(response, ("HX-Request",))
    return response
