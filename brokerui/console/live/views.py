"""Metric panel pages: the user's panels with the new-panel form, one panel live, edit, delete.

Every query is limited to the user's own panels (another user's panel is a 404). Viewers may
create panels too: a panel reads a topic and changes nothing in the cluster. The form posts with
htmx; on errors only the form comes back, with what was typed and per-field messages (field
paths that do not fit the topic's sampled records say why; a plain post gets the page with
status 422), on success the browser goes to the panel's page (its own URL).
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from brokerui.audit.services import process_sink
from brokerui.cluster import get_cluster
from brokerui.console.live import services
from brokerui.console.live.forms import PanelForm, initial_from_spec
from brokerui.console.live.models import MetricPanel
from streams.errors import FieldsDoNotFit, TidelogError


def _topics() -> list[str]:
    return sorted(t.name for t in get_cluster().list_topics() if not t.internal)


def _go(request, url: str):
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _form_page(request, form, panels, *, panel=None, status=200):
    context = {"nav": "panels", "form": form, "panels": panels, "panel": panel}
    if request.htmx and not request.htmx.history_restore_request:
        # 200 even for errors: htmx swaps only successful responses into the page
        return render(request, "console/live/partials/panel_form.html", context)
    return render(request, "console/live/panels.html", context, status=status)


@require_http_methods(["GET", "POST"])
def panel_list(request):
    panels = MetricPanel.objects.filter(user=request.user)
    if request.method == "GET":
        return _form_page(request, PanelForm(topics=_topics()), panels)
    form = PanelForm(request.POST, topics=_topics())
    if not form.is_valid():
        return _form_page(request, form, panels, status=422)
    try:
        panel = services.panel_create(
            user=request.user,
            name=form.cleaned_data["name"],
            spec=form.spec,
            accept_partial=form.cleaned_data["accept_partial"],
            sink=process_sink(),
        )
    except FieldsDoNotFit as exc:  # checked against a sample of the topic's records
        form.add_sample_problems(exc)
        return _form_page(request, form, panels, status=422)
    except TidelogError as exc:  # e.g. the topic went away meanwhile
        form.add_error(None, str(exc))
        return _form_page(request, form, panels, status=422)
    messages.success(request, f"Panel “{panel.name}” created.")
    return _go(request, reverse("console:panel", args=[panel.pk]))


def panel_detail(request, pk: int):
    panel = get_object_or_404(MetricPanel, pk=pk, user=request.user)
    try:
        running = services.ensure_panel(panel)  # jobs live in memory: re-ensure on every visit
        problem = None
    except TidelogError as exc:
        running, problem = False, str(exc)
    context = {
        "nav": "panels",
        "panel": panel,
        "spec": panel.spec,
        "running": running,
        "problem": problem,
    }
    return render(request, "console/live/panel.html", context)


@require_http_methods(["GET", "POST"])
def panel_edit(request, pk: int):
    panel = get_object_or_404(MetricPanel, pk=pk, user=request.user)
    panels = MetricPanel.objects.filter(user=request.user)
    if request.method == "GET":
        form = PanelForm(initial=initial_from_spec(panel.name, panel.spec), topics=_topics())
        return _form_page(request, form, panels, panel=panel)
    form = PanelForm(request.POST, topics=_topics())
    if not form.is_valid():
        return _form_page(request, form, panels, panel=panel, status=422)
    try:
        services.panel_update(
            panel=panel,
            user=request.user,
            name=form.cleaned_data["name"],
            spec=form.spec,
            accept_partial=form.cleaned_data["accept_partial"],
            sink=process_sink(),
        )
    except FieldsDoNotFit as exc:
        form.add_sample_problems(exc)
        return _form_page(request, form, panels, panel=panel, status=422)
    except TidelogError as exc:
        form.add_error(None, str(exc))
        return _form_page(request, form, panels, panel=panel, status=422)
    messages.success(request, f"Panel “{panel.name}” saved.")
    return _go(request, reverse("console:panel", args=[panel.pk]))


@require_POST
def panel_delete(request, pk: int):
    panel = get_object_or_404(MetricPanel, pk=pk, user=request.user)
    name = panel.name
    services.panel_delete(panel=panel, user=request.user, sink=process_sink())
    messages.success(request, f"Panel “{name}” deleted.")
    return _go(request, reverse("console:panels"))
