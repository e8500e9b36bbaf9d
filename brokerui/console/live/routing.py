"""WebSocket routes of the live console (included by `brokerui.routing`)."""

from django.urls import path

from brokerui.console.live.consumers import (
    MetricsConsumer,
    PanelConsumer,
    SearchConsumer,
    TailConsumer,
    ViewConsumer,
)

websocket_urlpatterns = [
    path("ws/metrics/", MetricsConsumer.as_asgi()),
    path("ws/panels/<int:pk>/", PanelConsumer.as_asgi()),
    path("ws/views/", ViewConsumer.as_asgi()),  # a job's table, SUBSCRIBE-style
    path("ws/searches/<str:qid>/", SearchConsumer.as_asgi()),
    path("ws/tail/", TailConsumer.as_asgi()),  # the message browser's live tail: when to fetch
]
