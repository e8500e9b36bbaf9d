"""Request bodies larger than Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` get 413 with the limit.

Django refuses such a body with ``RequestDataTooBig`` when something reads it (a form's
``request.POST`` in the CSRF check or a view, DRF's JSON parser through ``request.body``); left
to them that is a bare 400 for a form and a 500 in the API. `RequestSizeLimitMiddleware` reads
the body first, the way Django would (so the setting keeps Django's meaning: a console form's
uploaded files do not count, only its fields), and answers the error itself with
`too_large_response`: the API's JSON error or the console's page, both with the limit. A body
whose Content-Length is over the limit is refused without being read.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, UnreadablePostError
from django.shortcuts import render

from brokerui.cluster import is_api_path

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FORM_TYPES = frozenset({"multipart/form-data", "application/x-www-form-urlencoded"})


def body_limit() -> int | None:
    """The largest body Django reads into memory, in bytes (None: no limit)."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB".replace(".0 MiB", " MiB")


def too_large_message(limit: int) -> str:
    return f"the request body is larger than {limit:,} bytes ({_mib(limit)}), the most accepted"


def too_large_response(request: HttpRequest) -> HttpResponse:
    """413: the API's JSON error, or the console's page saying the limit and nothing changed."""
    limit = body_limit() or 0
    if is_api_path(request.path):
        from brokerui.api.errors import RequestTooLarge, error_body

        exc = RequestTooLarge.of(limit)
        body = error_body(exc.default_code, str(exc.detail), **exc.details)
        return JsonResponse(body, status=413)
    context = {"limit_bytes": limit, "limit_text": _mib(limit), "back": request.path}
    return render(request, "console/request_too_large.html", context, status=413)


def _read_body(request: HttpRequest) -> None:
    """Read the body as Django would, applying its limit (raises ``RequestDataTooBig``): form
    fields for a console form (uploaded files do not count), the whole body otherwise."""
    if request.method not in BODY_METHODS:
        return
    if not is_api_path(request.path) and request.content_type in FORM_TYPES:
        request.POST  # noqa: B018 - parses (and caches) the form as the view would
    else:
        request.body  # noqa: B018 - reads (and caches) it; over the limit it is not read


class RequestSizeLimitMiddleware:
    """413 for a body over the limit, before a view or another middleware meets the error."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            _read_body(request)
        except RequestDataTooBig:
            return too_large_response(request)
        except UnreadablePostError:  # the client went away: the view sees it as before
            pass
        return self.get_response(request)
