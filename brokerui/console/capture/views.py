"""Capture pages: the change-data-capture sources running in the broker's process with their
progress (refreshed by htmx), an operator's start (a form), snapshot (a form) and stop (behind
a confirmation page). Each view calls one service."""

from __future__ import annotations

import time

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods

from brokerui.audit.services import Actor, process_sink
from brokerui.console.capture import services
from brokerui.console.live.feeds import capture_sources
from brokerui.console.roles import operator_required
from streams.capture.postgres import CaptureError

POLL_SECONDS = 2


def _now_ms() -> int:
    return int(time.time() * 1000)


class StartForm(forms.Form):
    name = forms.CharField(
        max_length=63, help_text="names the slot (tidelog_NAME) and the topics' prefix"
    )
    dsn = forms.CharField(
        label="PostgreSQL DSN",
        max_length=1000,
        help_text="host=… port=… user=… dbname=… (the user needs the REPLICATION attribute)",
    )
    tables = forms.CharField(max_length=2000, help_text="TABLE or SCHEMA.TABLE, comma-separated")
    snapshot = forms.BooleanField(
        required=False, help_text="also read the tables' current rows (while the stream runs)"
    )


class SnapshotForm(forms.Form):
    table = forms.CharField(max_length=200)
    keys = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='blank: the whole table; else one key per line, e.g. {"id": 7}',
    )


class StopForm(forms.Form):
    confirm = forms.BooleanField(required=True, error_messages={"required": "tick to confirm"})


@require_GET
def capture_list(request):
    view = services.capture_read(host=capture_sources(), now_ms=_now_ms())
    partial = bool(request.htmx) and not request.htmx.history_restore_request
    template = "console/capture/partials/sources.html" if partial else "console/capture/list.html"
    response = render(
        request,
        template,
        {"nav": "capture", "view": view, "poll_seconds": POLL_SECONDS, "form": StartForm()},
    )
    patch_vary_headers(response, ("HX-Request",))
    return response


@operator_required
@require_http_methods(["GET", "POST"])
def capture_start(request):
    form = StartForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            status = services.capture_start(
                host=capture_sources(),
                name=d["name"],
                dsn=d["dsn"],
                tables=d["tables"].split(","),
                snapshot=d["snapshot"],
                sink=process_sink(),
                actor=Actor(request.user),
            )
        except CaptureError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                f"Capturing {', '.join(status.tables)} as {status.name} into "
                f"{', '.join(status.topics)}.",
            )
            return redirect("console:capture")
    return render(request, "console/capture/start.html", {"nav": "capture", "form": form})


@operator_required
@require_http_methods(["GET", "POST"])
def capture_snapshot(request, name: str):
    host = capture_sources()
    try:
        source = services.source_read(host=host, name=name)
    except CaptureError as exc:
        messages.error(request, str(exc))
        return redirect("console:capture")
    form = SnapshotForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            job = services.capture_snapshot(
                host=host,
                name=name,
                table=form.cleaned_data["table"],
                keys_text=form.cleaned_data["keys"],
                sink=process_sink(),
                actor=Actor(request.user),
            )
        except CaptureError as exc:
            form.add_error(None, str(exc))
        else:
            what = "the whole table" if job.keys is None else f"{job.keys} key(s)"
            messages.success(request, f"Snapshot of {job.table} ({what}) queued.")
            return redirect("console:capture")
    return render(
        request, "console/capture/snapshot.html", {"nav": "capture", "source": source, "form": form}
    )


@operator_required
@require_http_methods(["GET", "POST"])
def capture_stop(request, name: str):
    host = capture_sources()
    try:
        source = services.source_read(host=host, name=name)
    except CaptureError as exc:
        messages.error(request, str(exc))
        return redirect("console:capture")
    form = StopForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            after = services.capture_stop(
                host=host, name=name, sink=process_sink(), actor=Actor(request.user)
            )
        except CaptureError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request, f"Stopped {name}; PostgreSQL has confirmed LSN {after.confirmed_lsn}."
            )
            return redirect("console:capture")
    return render(
        request, "console/capture/stop.html", {"nav": "capture", "source": source, "form": form}
    )
