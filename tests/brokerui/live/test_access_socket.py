"""The live WebSockets follow the role bindings (brokerui.access): a user who reads only the
topics team-a.* gets their live chart and is refused another topic's, with the reason; a user
with no role anywhere is refused the socket."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from brokerui.access.models import RoleBinding
from brokerui.console.live.consumers import REFUSED

pytestmark = pytest.mark.django_db


def test_a_topic_chart_needs_the_viewer_role_on_it(broker, hub, login, connect):
    for name in ("team-a.orders", "payments"):
        broker.store.create_topic(name, 1)
    rita = User.objects.create_user("rita")
    RoleBinding.objects.create(
        subject_type="user", subject="rita", role="viewer", kind="topic", pattern="team-a.*"
    )
    headers = login(rita)

    async def body():
        ws = connect("/ws/metrics/", headers)
        connected, _ = await ws.connect()
        assert connected
        await ws.send_json_to({"type": "subscribe", "scope": "topic", "name": "payments"})
        refused = await ws.receive_json_from(timeout=5)
        assert refused == {
            "type": "refused",
            "message": "This needs the viewer role on the topic payments.",
        }
        await ws.send_json_to({"type": "subscribe", "scope": "topic", "name": "team-a.orders"})
        first = await ws.receive_json_from(timeout=5)
        assert first["type"] != "refused"
        await ws.disconnect()

    async_to_sync(body)()


def test_a_user_bound_nowhere_is_refused_the_socket(broker, login, connect, settings):
    nobody = User.objects.create_user("nobody")
    RoleBinding.objects.create(
        subject_type="user", subject="nobody", role="viewer", cluster="prod", kind="cluster"
    )  # another cluster's binding: none on this one
    headers = login(nobody)

    async def body():
        ws = connect("/ws/metrics/", headers)
        connected, code = await ws.connect()
        assert not connected and code == REFUSED

    async_to_sync(body)()
