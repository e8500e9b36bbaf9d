"""htmx requests whose session expired get HX-Redirect to the login page, so the browser
navigates there instead of swapping the login form into a fragment of the page; a page whose
external cluster does not answer is the 503 page with the reason (ClusterUnavailableMiddleware);
a path under /c/NAME/ works on cluster NAME (ClusterMiddleware)."""

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


class ClusterMiddleware:
    """/c/NAME/...: cluster NAME is current for the request (``brokerui.cluster.using``) and
    its URLconf serves it, so every URL the request reverses stays under /c/NAME/. An unknown
    NAME is the 404 page naming the clusters there are. A streamed response (an export) is
    read on that cluster too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from brokerui import cluster

        name, _rest = cluster.split_path(request.path_info)
        if name is None:
            return self.get_response(request)
        if cluster.find(name) is None:
            from django.http import Http404

            from brokerui.console.errors import page_not_found

            known = ", ".join(e.name for e in cluster.entries())
            return page_not_found(request, Http404(f"There is no cluster {name!r} ({known})."))
        request.urlconf = cluster.urlconf_for(name)
        with cluster.using(name):
            response = self.get_response(request)
        if getattr(response, "streaming", False) and not getattr(response, "is_async", False):
            response.streaming_content = _on_cluster(name, response.streaming_content)
        return response


def _on_cluster(name, chunks):
    from brokerui import cluster

    iterator = iter(chunks)
    while True:
        with cluster.using(name):
            try:
                chunk = next(iterator)
            except StopIteration:
                return
        yield chunk
