"""The ASGI application: which protocol and which path goes where.

`build_application()` has no side effects beyond setting Django up, so tests (e.g. Channels'
`WebsocketCommunicator`) can build it without starting a broker; `brokerui.asgi` is the server's
entry point and also starts the broker.
"""

from __future__ import annotations

from django.core.asgi import get_asgi_application


def build_application():
    django_http = get_asgi_application()  # sets Django up before anything imports models

    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter, URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from brokerui.console.live.routing import websocket_urlpatterns  # live charts and panels

    return ProtocolTypeRouter(
        {
            # Static files are served by the app itself, DEBUG on or off: Tidelog is one
            # process on a loopback port with a few small files, so a separate static server
            # (or whitenoise, not a dependency) buys nothing. Django's handler finds files in
            # STATICFILES_DIRS directly, so no collectstatic step either.
            "http": ASGIStaticFilesHandler(django_http),
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
