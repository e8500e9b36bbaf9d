"""View pages: the tables of the jobs running in this server, and one table queried (by key,
range or window time, optionally waiting for offsets) and watched live over /ws/views/.
Each view calls one service."""

from __future__ import annotations

import functools

from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from brokerui.access.services import masker_for
from brokerui.console.jobviews import services
from streams.jobs.views import UnknownView


@require_GET
def view_list(request):
    rows = services.views_list(source=services.view_source())
    return render(request, "console/jobviews/list.html", {"nav": "views", "views": rows})


@require_GET
def view_detail(request, job: str, view: str):
    try:
        page = services.view_page(
            source=services.view_source(),
            job=job,
            view=view,
            params=request.GET,
            masker_for=functools.partial(masker_for, request.user),
        )
    except UnknownView as exc:
        context = {"nav": "views", "job": job, "view": view, "problem": str(exc)}
        return render(request, "console/jobviews/missing.html", context, status=404)
    partial = bool(request.htmx) and not request.htmx.history_restore_request
    template = (
        "console/jobviews/partials/result.html" if partial else "console/jobviews/detail.html"
    )
    context = {"nav": "views", "job": job, "view": view, "q": request.GET, **page}
    response = render(request, template, context)
    patch_vary_headers(response, ("HX-Request",))
    return response
