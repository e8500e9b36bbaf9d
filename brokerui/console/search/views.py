"""Saved-search pages: the list with the form (the query validated as it is typed, htmx),
one search's page with its matches arriving live (``/ws/searches/<id>/``), and deletion after
a confirmation page. Creating and deleting are for operators (they write a topic); each view
makes one service call."""

from __future__ import annotations

import functools

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from brokerui.access.grants import TOPIC
from brokerui.access.services import masker_for, visible_items
from brokerui.audit.services import Actor, process_sink
from brokerui.console.roles import is_operator, may_read, operator_required, refusal_text
from brokerui.console.search import services
from streams.errors import TidelogError
from streams.jobs.saved import InvalidSavedSearch, UnknownSavedSearch
from streams.jobs.search import MAX_QUERY_CHARS, QueryError


class SavedSearchForm(forms.Form):
    name = forms.CharField(max_length=100)
    topic = forms.CharField(max_length=249)
    query = forms.CharField(
        max_length=MAX_QUERY_CHARS,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        strip=False,
    )


def _topic(saved) -> str:
    return saved.topic


def _backend():
    backend = services.saved_searches_source()
    if backend is None:
        raise Http404("Saved searches run on the built-in broker: not on an external cluster.")
    return backend


@require_http_methods(["GET", "POST"])
def search_list(request):
    """GET: the saved searches and the form; POST (operators): save a new one."""
    form = SavedSearchForm(request.POST or None)
    if request.method == "POST":
        if not is_operator(request.user):
            return operator_required(search_list)(request)
        if form.is_valid():
            try:
                saved = services.saved_search_create(
                    searches=_backend(),
                    sink=process_sink(),
                    actor=Actor(request.user),
                    **form.cleaned_data,
                )
            except QueryError as exc:
                form.add_error("query", str(exc))
            except InvalidSavedSearch as exc:
                form.add_error(exc.field, str(exc))
            else:
                messages.success(request, f"Saved search “{saved.name}” saved.")
                return redirect("console:search", qid=saved.id)
    page = services.saved_searches_read(searches=services.saved_searches_source())
    page["searches"] = visible_items(request.user, TOPIC, page["searches"], name=_topic)
    context = {**page, "nav": "searches", "form": form, "can_operate": is_operator(request.user)}
    return render(request, "console/search/list.html", context)


@require_POST
def search_validate(request):
    """htmx: the query's check as it is typed (how it is read, or the error and where)."""
    query = request.POST.get("query", "")
    if not query.strip():  # nothing typed yet: nothing to say
        return render(request, "console/search/partials/check.html", {})
    try:
        context = {"validation": services.search_validate(query=query), "query": query}
    except QueryError as exc:
        context = {"error": exc, "query": query}
    return render(request, "console/search/partials/check.html", context)


@require_GET
def search_detail(request, qid: str):
    try:
        page = services.saved_search_read(
            searches=_backend(), qid=qid, masker_for=functools.partial(masker_for, request.user)
        )
    except UnknownSavedSearch:
        raise Http404(f"No saved search {qid}.") from None
    topic = page["search"].topic
    if not may_read(request.user, [(TOPIC, topic)]):
        raise PermissionDenied(refusal_text(request.user, [(TOPIC, topic)], "viewer"))
    context = {**page, "nav": "searches", "can_operate": is_operator(request.user)}
    return render(request, "console/search/detail.html", context)


@operator_required
@require_http_methods(["GET", "POST"])
def search_delete(request, qid: str):
    """GET: the confirmation page; POST with confirm=yes: delete (a tombstone)."""
    backend = _backend()
    try:
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            saved = services.saved_search_delete(
                searches=backend, sink=process_sink(), actor=Actor(request.user), qid=qid
            )
            messages.success(request, f"Saved search “{saved.name}” deleted.")
            return redirect("console:searches")
        page = services.saved_search_read(searches=backend, qid=qid)
    except UnknownSavedSearch:
        raise Http404(f"No saved search {qid}.") from None
    except TidelogError as exc:
        messages.error(request, str(exc))
        return redirect("console:searches")
    return render(request, "console/search/delete.html", {**page, "nav": "searches"})
