"""Transactions pages: the open transactions (refreshed by htmx) and an operator's abort of a
hanging one, behind a confirmation page. Each view calls one service."""

from __future__ import annotations

import time

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods

from brokerui.audit.services import Actor, process_sink
from brokerui.cluster import get_cluster
from brokerui.console.roles import operator_required
from brokerui.console.transactions import services
from streams.errors import InvalidTxnState, UnknownTransactionalId, Unsupported

POLL_SECONDS = 5


def _now_ms() -> int:
    return int(time.time() * 1000)


@require_GET
def transaction_list(request):
    view = services.transactions_read(cluster=get_cluster(), now_ms=_now_ms())
    partial = bool(request.htmx) and not request.htmx.history_restore_request
    template = (
        "console/transactions/partials/table.html" if partial else "console/transactions/list.html"
    )
    response = render(
        request,
        template,
        {"nav": "transactions", "view": view, "poll_seconds": POLL_SECONDS},
    )
    patch_vary_headers(response, ("HX-Request",))
    return response


class AbortForm(forms.Form):
    """The producer id, epoch and start time the operator saw: the abort is refused if the
    ongoing transaction is no longer that one."""

    producer_id = forms.IntegerField(min_value=0)
    producer_epoch = forms.IntegerField(min_value=0)
    start_ms = forms.IntegerField(required=False)
    confirm = forms.BooleanField(required=True, error_messages={"required": "tick to confirm"})


@operator_required
@require_http_methods(["GET", "POST"])
def transaction_abort(request, transactional_id: str):
    cluster = get_cluster()
    try:
        row = services.transaction_read(
            cluster=cluster, transactional_id=transactional_id, now_ms=_now_ms()
        )
    except (UnknownTransactionalId, Unsupported) as exc:
        messages.error(request, str(exc))
        return redirect("console:transactions")
    initial = {
        "producer_id": row.producer_id,
        "producer_epoch": row.producer_epoch,
        "start_ms": row.start_ms,
    }
    form = AbortForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            after = services.transaction_abort(
                cluster=cluster,
                sink=process_sink(),
                actor=Actor(request.user),
                transactional_id=transactional_id,
                producer_id=form.cleaned_data["producer_id"],
                producer_epoch=form.cleaned_data["producer_epoch"],
                start_ms=form.cleaned_data["start_ms"],
            )
        except InvalidTxnState as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                f"Aborted the transaction of {transactional_id} ({len(row.partitions)} "
                f"partition{'s' if len(row.partitions) != 1 else ''}); its producer is fenced "
                f"(epoch now {after.producer_epoch}).",
            )
            return redirect("console:transactions")
    return render(
        request,
        "console/transactions/abort.html",
        {"nav": "transactions", "row": row, "form": form},
    )
