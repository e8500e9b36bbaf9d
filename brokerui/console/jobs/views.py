"""Jobs pages: the stream jobs running in the broker's process with their workers' numbers
(refreshed by htmx; records per second are the live charts', over the WebSocket), an
operator's start, and stop behind a confirmation page. Each view calls one service."""

from __future__ import annotations

import time

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from brokerui.audit.services import Actor, process_sink
from brokerui.console.jobs import services
from brokerui.console.live.feeds import embedded_jobs
from brokerui.console.roles import operator_required
from streams.errors import TidelogError, UnknownJob, Unsupported

POLL_SECONDS = 2


def _now_ms() -> int:
    return int(time.time() * 1000)


@require_GET
def job_list(request):
    view = services.jobs_read(host=embedded_jobs(), now_ms=_now_ms())
    partial = bool(request.htmx) and not request.htmx.history_restore_request
    template = "console/jobs/partials/jobs.html" if partial else "console/jobs/list.html"
    response = render(
        request, template, {"nav": "jobs", "view": view, "poll_seconds": POLL_SECONDS}
    )
    patch_vary_headers(response, ("HX-Request",))
    return response


@operator_required
@require_POST
def job_start(request, name: str):
    try:
        status = services.job_start(
            host=embedded_jobs(), name=name, sink=process_sink(), actor=Actor(request.user)
        )
    except TidelogError as exc:
        messages.error(request, f"Job {name} did not start: {exc}")
    else:
        n = len(status.worker.partitions) if status.worker else 0
        messages.success(request, f"Started job {name} ({n} input partition{'s' * (n != 1)}).")
    return redirect("console:jobs")


class StopForm(forms.Form):
    confirm = forms.BooleanField(required=True, error_messages={"required": "tick to confirm"})


@operator_required
@require_http_methods(["GET", "POST"])
def job_stop(request, name: str):
    host = embedded_jobs()
    try:
        row = services.job_read(host=host, name=name, now_ms=_now_ms())
    except (UnknownJob, Unsupported) as exc:
        messages.error(request, str(exc))
        return redirect("console:jobs")
    form = StopForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.job_stop(host=host, name=name, sink=process_sink(), actor=Actor(request.user))
        except TidelogError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Stopped job {name}; its offsets and state are committed.")
            return redirect("console:jobs")
    return render(request, "console/jobs/stop.html", {"nav": "jobs", "row": row, "form": form})
