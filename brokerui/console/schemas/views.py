"""Schemas pages: the built-in registry's subjects, one subject (versions, a version's schema,
a diff of two versions, its compatibility level), registering a version (checked as one types,
by htmx) and deletes behind a typed confirmation.

Views are thin: each calls one function of `services`. An unknown subject or version is the
404 page; a refused change (409 incompatible, 422 invalid or not permitted) is the form again
with the registry's message and its status, never a 500; a viewer's POST is a 403.
"""

from __future__ import annotations

import dataclasses
import functools

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from brokerui.audit.services import Actor, process_sink
from brokerui.console.roles import operator_required
from brokerui.console.schemas import forms as schema_forms
from brokerui.console.schemas import mappings, services
from streams.schemas import errors as E

NAV = "schemas"


def _partial(request, target: str) -> bool:
    """An htmx request for the fragment `target` (not a history restore: that needs a page)."""
    return (
        bool(request.htmx)
        and not request.htmx.history_restore_request
        and request.htmx.target == target
    )


def registry_view(view):
    """Give the view the built-in broker (`host`), or answer with the 'unavailable' page on
    an external cluster; an unknown subject or version is the 404 page."""

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        host = services.schema_host()
        if host is None:
            return render(
                request,
                "console/schemas/unavailable.html",
                {"nav": NAV, "reason": services.UNAVAILABLE},
            )
        try:
            return view(request, host, *args, **kwargs)
        except (E.SubjectNotFound, E.VersionNotFound) as exc:
            return render(
                request,
                "console/schemas/missing.html",
                {"nav": NAV, "subject": kwargs.get("subject", ""), "message": exc.message},
                status=404,
            )

    return wrapper


def _detail_url(subject: str, **query) -> str:
    url = reverse("console:schema", args=[subject])
    query = {k: v for k, v in query.items() if v not in (None, "", False)}
    return f"{url}?{urlencode(query)}" if query else url


# ====================================================================== read


@require_GET
@registry_view
def schema_list(request, host):
    view = services.subjects_read(
        host=host,
        q=request.GET.get("q", "")[:300],
        deleted=request.GET.get("deleted") == "1",
        user=request.user.get_username(),
    )
    context = {"nav": NAV, "view": view, "types": schema_forms.TYPE_CHOICES}
    if _partial(request, "schema-table"):
        response = render(request, "console/schemas/partials/table.html", context)
    else:
        response = render(request, "console/schemas/list.html", context)
    patch_vary_headers(response, ("HX-Request",))
    return response


@require_GET
@registry_view
def schema_detail(request, host, subject: str):
    view = services.subject_read(
        host=host,
        subject=subject,
        version=request.GET.get("version"),
        left=request.GET.get("left"),
        right=request.GET.get("right"),
        deleted=request.GET.get("deleted") == "1",
    )
    context = {"nav": NAV, "view": view, "level_form": schema_forms.LevelForm()}
    if _partial(request, "schema-diff"):
        response = render(request, "console/schemas/partials/diff.html", context)
    else:
        response = render(request, "console/schemas/detail.html", context)
    patch_vary_headers(response, ("HX-Request",))
    return response


# ====================================================================== register


@operator_required
@require_http_methods(["GET", "POST"])
@registry_view
def schema_register(request, host, subject: str | None = None):
    """``/new-schema/`` (the subject typed) and ``/schemas/<subject>/register/``."""
    if request.method == "GET":
        start = services.register_form_read(
            registry=host.schemas, subject=subject or request.GET.get("subject", "")
        )
        values = {
            "subject": start.subject,
            "schema": start.schema,
            "schema_type": start.schema_type,
            "references": start.references,
        }
        return _register_page(request, subject, values, start=start)
    values = schema_forms.register_values(request.POST)
    if subject is not None:
        values["subject"] = subject
    try:
        result = services.schema_register(
            registry=host.schemas, sink=process_sink(), actor=Actor(request.user), **values
        )
    except E.RegistryError as exc:
        status = 503 if exc.status >= 500 else exc.status
        return _register_page(request, subject, values, error=exc, status=status)
    if result.new:
        messages.success(
            request,
            f"Registered {result.subject} version {result.version} (schema id {result.id}).",
        )
    else:
        messages.info(
            request,
            f"{result.subject} has this schema already: version {result.version} (schema id "
            f"{result.id}); nothing was written.",
        )
    return redirect(_detail_url(result.subject, version=result.version))


def _register_page(request, subject, values, *, start=None, error=None, status=200):
    context = {
        "nav": NAV,
        "values": values,
        "fixed_subject": subject,
        "start": start,
        "error": error,
        "types": schema_forms.TYPE_CHOICES,
    }
    return render(request, "console/schemas/register.html", context, status=status)


@operator_required
@require_POST
@registry_view
def schema_check(request, host):
    """The register form's check as one types (htmx): a partial, always 200."""
    values = schema_forms.register_values(request.POST)
    result = services.schema_check(registry=host.schemas, **values)
    return render(request, "console/schemas/partials/check.html", {"check": result})


# ====================================================================== compatibility level


@operator_required
@require_POST
@registry_view
def schema_config(request, host, subject: str):
    form = schema_forms.LevelForm(request.POST)
    level = form.cleaned_data["level"] if form.is_valid() else request.POST.get("level", "")
    try:
        change = services.schema_config_set(
            registry=host.schemas,
            sink=process_sink(),
            actor=Actor(request.user),
            subject=subject,
            level=level,
        )
    except (E.SubjectNotFound, E.VersionNotFound):
        raise
    except E.RegistryError as exc:
        messages.error(request, f"The level of {subject} did not change: {exc.message}")
    else:
        if not change.changed:
            messages.info(request, f"{subject} follows {change.after} already.")
        elif change.own:
            messages.success(request, f"{subject}: compatibility {change.before} → {change.after}.")
        else:
            messages.success(request, f"{subject} follows the global level now ({change.after}).")
    return redirect(_detail_url(subject))


# ====================================================================== deletes


@operator_required
@require_http_methods(["GET", "POST"])
@registry_view
def schema_delete(request, host, subject: str, version: int | None = None, permanent=False):
    """Soft or permanent delete of a version or of the whole subject, behind a typed
    confirmation; a permanent delete is offered only once it is soft-deleted."""
    plan = services.delete_plan(host=host, subject=subject, version=version, permanent=permanent)
    form = schema_forms.ConfirmForm(
        request.POST if request.method == "POST" else None, expected=plan.expected
    )
    status = 200 if plan.allowed else 409
    if request.method == "POST" and plan.allowed and form.is_valid():
        try:
            gone = services.schema_delete(
                registry=host.schemas,
                sink=process_sink(),
                actor=Actor(request.user),
                subject=subject,
                version=version,
                permanent=permanent,
            )
        except (E.SubjectNotFound, E.VersionNotFound):
            raise
        except E.RegistryError as exc:
            form.add_error(None, exc.message)
            status = exc.status if exc.status < 500 else 503
        else:
            how = "Permanently deleted" if permanent else "Soft-deleted"
            if version is not None:
                messages.success(request, f"{how} version {version} of {subject}.")
            else:
                listed = ", ".join(str(v) for v in gone)
                plural = "s" * (len(gone) != 1)
                messages.success(request, f"{how} {subject} (version{plural} {listed}).")
            if plan.remaining == 0:  # nothing of the subject is left
                return redirect(f"{reverse('console:schemas')}?deleted=1")
            return redirect(_detail_url(subject, deleted="1"))
    return render(
        request,
        "console/schemas/delete.html",
        {"nav": NAV, "plan": plan, "form": form},
        status=status,
    )


# ====================================================================== topic mappings


def _mapping_context(request, topic: str, **extra) -> dict:
    from brokerui.cluster import get_cluster
    from brokerui.schemas import console_registry, mapping_book, subject_names
    from streams.errors import UnknownTopic

    try:
        view = mappings.mappings_read(
            cluster=get_cluster(), book=mapping_book(), topic=topic, registry=console_registry()
        )
    except UnknownTopic:
        raise Http404(f"Topic “{topic}” does not exist.") from None
    return {
        "nav": "topics",
        "view": view,
        "subjects": subject_names(),
        "values": {"part": "value", "source": "registry" if view.registry else "avro"},
        **extra,
    }


@require_http_methods(["GET", "POST"])
def topic_schema_mapping(request, name: str):
    """A topic's key or value mapped to a schema without the wire format: the current
    mappings, and (operators) the form to map one."""
    from brokerui.console.roles import is_operator
    from brokerui.schemas import console_registry, mapping_book
    from streams.schemas.mapping import MappingError

    if request.method == "GET":
        return render(request, "console/schemas/mapping.html", _mapping_context(request, name))
    if not is_operator(request.user):
        raise PermissionDenied("This needs the operator role.")
    wanted = schema_forms.mapping_request(request.POST, request.FILES)
    try:
        mapping = mappings.mapping_set(
            book=mapping_book(),
            registry=console_registry(),
            sink=process_sink(),
            actor=Actor(request.user),
            topic=name,
            request=wanted,
        )
    except MappingError as exc:
        values = dataclasses.asdict(wanted) | {"descriptor_set": None}
        context = _mapping_context(request, name, error=str(exc), values=values)
        return render(request, "console/schemas/mapping.html", context, status=422)
    messages.success(request, f"The {mapping.part}s of {name} are read with {mapping.label}.")
    return redirect(reverse("console:topic_schema_mapping", args=[name]))


@operator_required
@require_http_methods(["GET", "POST"])
def topic_schema_unmap(request, name: str, part: str):
    """Unmapping a topic's key or value, behind a confirmation."""
    from brokerui.schemas import mapping_book

    book = mapping_book()
    mapping = mappings.mapping_get(book=book, topic=name, part=part)
    back = reverse("console:topic_schema_mapping", args=[name])
    if mapping is None:
        messages.info(request, f"The {part}s of {name} are not mapped to a schema.")
        return redirect(back)
    if request.method == "POST":
        mappings.mapping_remove(
            book=book, sink=process_sink(), actor=Actor(request.user), topic=name, part=part
        )
        messages.success(request, f"The {part}s of {name} are no longer read with a mapping.")
        return redirect(back)
    return render(
        request, "console/schemas/unmap.html", {"nav": "topics", "mapping": mapping, "back": back}
    )
