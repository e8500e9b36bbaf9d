"""``GET /metrics``: Prometheus exposition, for API tokens (and console sessions).

A scraper authenticates with a console user's API token, as ``Authorization: Bearer <key>``
(Prometheus's ``authorization: credentials`` default) or ``Authorization: Token <key>`` (the JSON
API's form); any role may read. Without one: 401 with ``WWW-Authenticate: Bearer``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from brokerui.access.services import grants_for
from brokerui.console.roles import may_read, refusal_text
from brokerui.metrics.services import metrics_exposition


class BearerTokenAuthentication(TokenAuthentication):
    """The API's tokens, sent as ``Authorization: Bearer <key>``."""

    keyword = "Bearer"


class AnyAccept(BaseContentNegotiation):
    """The exposition format follows Accept itself (`metrics_exposition`); DRF's renderer only
    shapes errors (JSON), so no Accept header is refused with 406."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type

    def select_parser(self, request, parsers):
        return None


class MetricsView(APIView):
    authentication_classes = [
        BearerTokenAuthentication,  # first: its header is the 401's WWW-Authenticate
        TokenAuthentication,
        SessionAuthentication,
    ]
    permission_classes = [IsAuthenticated]
    content_negotiation_class = AnyAccept
    schema = None  # not part of the JSON API's schema

    @classmethod
    def as_view(cls, *args, **kwargs):
        return login_not_required(super().as_view(*args, **kwargs))

    def get(self, request):
        if not may_read(request.user, []):
            raise PermissionDenied(refusal_text(request.user, [], "viewer"))
        body, content_type = metrics_exposition(
            accept=request.META.get("HTTP_ACCEPT", ""), grants=grants_for(request.user)
        )
        return HttpResponse(body, content_type=content_type)
