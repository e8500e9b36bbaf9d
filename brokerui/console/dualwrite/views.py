"""The dual-write race page: a form that starts a run, and the run's page (its progress
refreshed by htmx while it runs, then its results). Each view calls one service."""

from __future__ import annotations

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods

from brokerui.console.dualwrite import services
from brokerui.console.roles import is_operator
from streams.errors import InvalidConfig
from streams.eventsourcing.dualwrite import MAX_KEYS, MAX_UPDATES

POLL_MS = 500


class RunForm(forms.Form):
    keys = forms.IntegerField(
        min_value=1, max_value=MAX_KEYS, initial=100, help_text="distinct keys the writers update"
    )
    updates = forms.IntegerField(
        min_value=1,
        max_value=MAX_UPDATES,
        initial=1_000,
        help_text="updates each of the two writers makes",
    )


@require_http_methods(["GET", "POST"])
def dualwrite_page(request):
    if request.method == "POST" and not is_operator(request.user):
        # a run loads the server and, in the cdc mode, writes to the configured PostgreSQL
        raise PermissionDenied("Starting a run needs the operator role.")
    form = RunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            run_id = services.dualwrite_start(**form.cleaned_data)
        except (services.RunBusy, InvalidConfig) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("console:dualwrite_run", run_id=run_id)
    run, through = services.dualwrite_overview()
    context = {"nav": "dualwrite", "form": form, "run": run, "through": through, "poll_ms": POLL_MS}
    return render(
        request, "console/dualwrite/page.html", context, status=400 if form.errors else 200
    )


@require_GET
def dualwrite_run(request, run_id: str):
    try:
        run = services.dualwrite_read(run_id=run_id)
    except KeyError:
        raise Http404("No such run (this server keeps its last runs in memory).") from None
    partial = bool(request.htmx) and not request.htmx.history_restore_request
    template = "console/dualwrite/partials/run.html" if partial else "console/dualwrite/page.html"
    form = RunForm(initial={"keys": run.keys, "updates": run.updates})
    context = {
        "nav": "dualwrite",
        "form": form,
        "run": run,
        "through": run.through,
        "poll_ms": POLL_MS,
    }
    response = render(request, template, context)
    patch_vary_headers(response, ("HX-Request",))
    return response
