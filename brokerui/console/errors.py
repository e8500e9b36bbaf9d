"""The console's error pages (400, 403, 404, 500, and 503 when the external cluster does not
answer or cannot be connected to: `cluster_unavailable`): the console's layout, the reason in words,
and a way back. Under ``/api/`` they answer the API's JSON error shape instead of HTML.

Django calls these (``handler400`` ... in brokerui/urls.py) for errors no view handled itself.
The 500 page is rendered without the request's context processors, so a failing database or
broker cannot fail the error page too; Django logs the traceback on ``django.request``
(settings.LOGGING sends it to the server's log).
"""

from __future__ import annotations

from django.core.exceptions import (
    DisallowedHost,
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.template.response import TemplateResponse

# Reasons worth telling for a 400; the exception's own text may name server settings.
BAD_REQUEST_REASONS = (
    (DisallowedHost, "This server does not answer to the host name the request was sent to."),
    (RequestDataTooBig, "The request body is larger than this server accepts."),
    (TooManyFieldsSent, "The form sent more fields than this server accepts."),
    (TooManyFilesSent, "The form sent more files than this server accepts."),
)
GENERIC_BAD_REQUEST = "The server could not understand the request."
GENERIC_FORBIDDEN = "You are not allowed to do this."
GENERIC_NOT_FOUND = "There is no page at this address."


def bad_request(request: HttpRequest, exception=None) -> HttpResponse:
    reason = next(
        (text for kind, text in BAD_REQUEST_REASONS if isinstance(exception, kind)),
        GENERIC_BAD_REQUEST,
    )
    # no request context: the request itself may be what is wrong (e.g. its Host header)
    return _page(None, request, 400, "400.html", "bad_request", reason)


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    return _page(
        request,
        request,
        403,
        "403.html",
        "permission_denied",
        _message(exception) or GENERIC_FORBIDDEN,
    )


def page_not_found(request: HttpRequest, exception=None) -> HttpResponse:
    return _page(
        request, request, 404, "404.html", "not_found", _message(exception) or GENERIC_NOT_FOUND
    )


def server_error(request: HttpRequest) -> HttpResponse:
    reason = "Something went wrong on the server. The error is in the server's log."
    return _page(None, request, 500, "500.html", "internal_error", reason)


def cluster_unavailable(request: HttpRequest, exception) -> HttpResponse:
    """503: the external cluster (TIDELOG_CLUSTER) did not answer, refused the sign-in or the
    TLS handshake, or its connection settings are wrong; the reason says which (secrets are
    never in it: streams.cluster.connection.hide_secrets)."""
    return _page(request, request, 503, "503.html", "cluster_unavailable", str(exception))


def _page(context_request, request, status: int, template: str, code: str, reason: str):
    from brokerui.cluster import is_api_path

    if is_api_path(request.path):
        from brokerui.api.errors import error_body

        return JsonResponse(error_body(code, reason), status=status)
    context = {"reason": reason, "status": status, "request_path": request.path}
    if context_request is None:
        return HttpResponse(loader.get_template(template).render(context), status=status)
    response = TemplateResponse(context_request, template, context, status=status)
    return response.render()


def _message(exception) -> str:
    """The text the view raised with (``PermissionDenied("This needs the operator role.")``),
    not the URL resolver's internals."""
    if exception is None or not exception.args:
        return ""
    first = exception.args[0]
    return first if isinstance(first, str) else ""
