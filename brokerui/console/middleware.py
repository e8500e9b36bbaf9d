"""htmx requests whose session expired get HX-Redirect to the login page, so the browser
navigates there instead of swapping the login form into a fragment of the page; a page whose
external cluster does not answer is the 503 page with the reason (ClusterUnavailableMiddleware)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import resolve_url


class HtmxLoginRedirectMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        login = resolve_url(settings.LOGIN_URL)
        if (
            request.headers.get("HX-Request") == "true"
            and response.status_code == 302
            and response.get("Location", "").startswith(login)
        ):
            redirect = HttpResponse(status=204)
            redirect["HX-Redirect"] = f"{login}?next={request.headers.get('HX-Current-URL', '/')}"
            return redirect
        return response


class ClusterUnavailableMiddleware:
    """A view that raised ClusterUnavailable (TIDELOG_CLUSTER unreachable, sign-in or TLS
    refused, connection settings wrong) answers the 503 page saying why, not a 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from streams.errors import ClusterUnavailable

        if isinstance(exception, ClusterUnavailable):
            from brokerui.console.errors import cluster_unavailable

            return cluster_unavailable(request, exception)
        return None
