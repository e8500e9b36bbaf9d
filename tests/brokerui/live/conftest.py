"""Fixtures of the live-metrics tests: the ASGI app, WebSocket clients with a real session, a
metrics hub driven by a hand-advanced clock over the test broker, a private redis-server."""

from __future__ import annotations

import time

import pytest
from channels.testing import WebsocketCommunicator

from streams.broker.metrics import MetricsHub
from tests.system_programs import require_program


class HandClock:
    """Milliseconds that move only when a test says so; starts a minute ago, just after a
    second boundary (as the sampler ticks), so pages asking for "the last 15 minutes" see it."""

    def __init__(self) -> None:
        self.now = (int(time.time()) - 60) * 1000 + 300

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def application(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    from brokerui.routing import build_application

    return build_application()


@pytest.fixture
def clock() -> HandClock:
    return HandClock()


@pytest.fixture
def hub(broker, clock, monkeypatch):
    """A real `MetricsHub` over the test broker, ticked by the test (`hub.tick()`) instead of
    the broker's own (stopped, so only this one writes ``__metrics``)."""
    from brokerui.console.live import feeds

    if broker.metrics is not None:
        broker.metrics.close()
    hub = MetricsHub(broker.store, broker.coordinator, clock=clock)
    monkeypatch.setattr(feeds, "metrics_hub", lambda: hub)
    hub.tick()  # the first sample is the baseline
    return hub


@pytest.fixture
def login(client):
    """`login(user)`: the headers of a browser with `user`'s session (None: anonymous).

    Call it outside the event loop (it writes the session); open the socket with `connect`
    inside it."""

    def headers(user=None) -> list[tuple[bytes, bytes]]:
        out = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
        if user is not None:
            client.force_login(user)
            out.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
        return out

    return headers


@pytest.fixture
def connect(application):
    """`connect(path, headers)`: a WebsocketCommunicator on the whole ASGI app (in a loop)."""

    def make(path: str, headers) -> WebsocketCommunicator:
        return WebsocketCommunicator(application, path, headers=headers)

    return make


def require_redis_server() -> None:
    """redis-server, or a skip (a failure under CI): see tests/system_programs.py."""
    require_program("redis-server")


@pytest.fixture
def redis_url(tmp_path):
    """A private redis-server (Debian's package) on a free loopback port; its URL."""
    require_redis_server()
    from tests.bench.common import RedisServer

    with RedisServer(str(tmp_path / "redis"), appendonly=False) as server:
        yield f"redis://127.0.0.1:{server.port}/0"
