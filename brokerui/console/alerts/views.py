"""Alert pages: the rules with where each stands, the firing alerts and the latest webhook
deliveries; create, edit and delete (after a confirmation page) for operators."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from brokerui.audit.services import Actor, process_sink
from brokerui.console.alerts import services
from brokerui.console.alerts.forms import AlertRuleForm, initial_from_rule
from brokerui.console.roles import is_operator, operator_required
from streams.errors import UnknownAlertRule


def _backend():
    backend = services.alerts_source()
    if backend is None:
        raise Http404("Alerts run in the built-in broker: not available on an external cluster.")
    return backend


@require_GET
def alert_list(request):
    overview = services.alerts_read(alerts=services.alerts_source())
    context = {"nav": "alerts", "overview": overview, "can_operate": is_operator(request.user)}
    return render(request, "console/alerts/list.html", context)


@operator_required
@require_http_methods(["GET", "POST"])
def alert_create(request):
    backend = _backend()
    form = AlertRuleForm(request.POST or None, initial=_initial(request))
    if request.method == "POST" and form.is_valid():
        rule = services.alert_rule_create(
            alerts=backend,
            sink=process_sink(),
            actor=Actor(request.user),
            fields=form.fields_for_rule,
        )
        messages.success(request, f"Alert rule “{rule.name}” created.")
        return redirect("console:alerts")
    return render(request, "console/alerts/form.html", {"nav": "alerts", "form": form})


@operator_required
@require_http_methods(["GET", "POST"])
def alert_edit(request, rule_id: str):
    backend = _backend()
    rule = _rule(backend, rule_id)
    form = AlertRuleForm(request.POST or None, initial=initial_from_rule(rule), rule_id=rule.id)
    if request.method == "POST" and form.is_valid():
        rule = services.alert_rule_update(
            alerts=backend,
            sink=process_sink(),
            actor=Actor(request.user),
            rule_id=rule.id,
            fields=form.fields_for_rule,
        )
        messages.success(request, f"Alert rule “{rule.name}” saved.")
        return redirect("console:alerts")
    context = {"nav": "alerts", "form": form, "rule": rule}
    return render(request, "console/alerts/form.html", context)


@operator_required
@require_http_methods(["GET", "POST"])
def alert_delete(request, rule_id: str):
    """GET: the confirmation page; POST with confirm=yes: delete."""
    backend = _backend()
    rule = _rule(backend, rule_id)
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        services.alert_rule_delete(
            alerts=backend, sink=process_sink(), actor=Actor(request.user), rule_id=rule.id
        )
        messages.success(request, f"Alert rule “{rule.name}” deleted.")
        return redirect("console:alerts")
    context = {"nav": "alerts", "rule": rule, "webhook": services.redacted_url(rule.webhook_url)}
    return render(request, "console/alerts/delete.html", context)


def _rule(backend, rule_id: str):
    try:
        return backend.rules.get(rule_id)
    except UnknownAlertRule:
        raise Http404(f"No alert rule {rule_id}.") from None


def _initial(request) -> dict:
    """A new rule may be prefilled from the page it was started on (?scope=group&target=…)."""
    return {k: request.GET[k] for k in ("scope", "target") if k in request.GET}
