"""WebSocket routes of the live console (included by `brokerui.routing`)."""

from django.urls import path

from brokerui.console.live.consumers import MetricsConsumer, PanelConsumer, SearchConsumer

websocket_urlpatterns = [
    path("ws/metrics/", MetricsConsumer.as_asgi()),
    path("ws/panels/<int:pk>/", PanelConsumer.as_asgi()),
    path("ws/searches/<str:qid>/", SearchConsumer.as_asgi()),
]
