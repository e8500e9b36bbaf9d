"""htmx requests whose session expired get HX-Redirect to the login page, so the browser
navigates there instead of swapping the login form into a fragment of the page."""

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
