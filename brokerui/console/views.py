"""Console pages. Each view parses input, calls one selector or service, renders."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from brokerui.broker import get_broker
from brokerui.console.selectors import topics_overview


def home(request: HttpRequest) -> HttpResponse:
    overview = topics_overview(get_broker().store)
    return render(request, "console/home.html", {"overview": overview})
