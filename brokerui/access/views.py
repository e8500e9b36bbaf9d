"""The Access page: role bindings, listed to every user, changed by those who manage them
(a superuser, or an operator of every cluster), each change behind a form and audited."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from brokerui import cluster
from brokerui.access import services
from brokerui.access.grants import BadBinding
from brokerui.access.models import MaskRule, RoleBinding
from brokerui.audit.services import Actor, process_sink

MANAGE_MESSAGE = "Role bindings are managed by a superuser or an operator of every cluster."


def _clusters() -> list[str]:
    return [entry.name for entry in cluster.entries()]


def _require_manager(request) -> None:
    if not services.may_manage(request.user):
        raise PermissionDenied(MANAGE_MESSAGE)


def _page(request, status: int = 200, **forms):
    """The Access page; `forms`: a refused form's values and its error, shown again."""
    context = {"nav": "access", **services.access_read(request.user, _clusters())}
    context.update({"form": {}, "mask_form": {}, **forms})
    return render(request, "access/list.html", context, status=status)


@require_GET
def access_page(request):
    return _page(request)


@require_POST
def binding_add(request):
    _require_manager(request)
    fields = {
        key: request.POST.get(key, "")
        for key in ("subject_type", "subject", "role", "cluster", "kind", "pattern")
    }
    try:
        row = services.binding_add(
            sink=process_sink(), actor=Actor(request.user), clusters=_clusters(), **fields
        )
    except BadBinding as exc:
        return _page(request, 400, form=fields, error=str(exc))
    messages.success(request, f"Bound {row}.")
    return redirect("access")


@require_http_methods(["GET", "POST"])
def binding_remove(request, pk: int):
    """GET: the confirmation page; POST with confirm=yes: remove."""
    _require_manager(request)
    row = get_object_or_404(RoleBinding, pk=pk)
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        services.binding_remove(sink=process_sink(), actor=Actor(request.user), pk=row.pk)
        messages.success(request, f"Removed {row}.")
        return redirect("access")
    return render(request, "access/remove.html", {"nav": "access", "binding": row})


@require_POST
def mask_add(request):
    _require_manager(request)
    fields = {key: request.POST.get(key, "") for key in ("topic", "path", "action")}
    try:
        row = services.mask_rule_add(sink=process_sink(), actor=Actor(request.user), **fields)
    except BadBinding as exc:
        return _page(request, 400, mask_form=fields, mask_error=str(exc))
    messages.success(request, f"Masking: {row}.")
    return redirect("access")


@require_http_methods(["GET", "POST"])
def mask_remove(request, pk: int):
    """GET: the confirmation page; POST with confirm=yes: remove (the field shows again)."""
    _require_manager(request)
    row = get_object_or_404(MaskRule, pk=pk)
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        services.mask_rule_remove(sink=process_sink(), actor=Actor(request.user), pk=row.pk)
        messages.success(request, f"No longer masked: {row.path} of topics {row.topic}.")
        return redirect("access")
    return render(request, "access/mask_remove.html", {"nav": "access", "rule": row})
