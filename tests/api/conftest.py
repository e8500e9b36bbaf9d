"""Fixtures for the JSON API: the web layer's broker and users, API clients with token or
session auth, and a consumer group with committed offsets (and optionally a live member)."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from streams.groups.schemas import Subscription
from streams.log import ProducerRecord

API = "/api/v1"


# ------------------------------------------------------------------------------ API clients


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def anon(db, broker):
    return APIClient()


@pytest.fixture
def op(operator, broker):
    """An operator authenticated by token."""
    return token_client(operator)


@pytest.fixture
def view(viewer, broker):
    """A viewer authenticated by token."""
    return token_client(viewer)


@pytest.fixture
def cluster(broker):
    from brokerui.cluster import get_cluster

    return get_cluster()


@pytest.fixture
def orders(broker):
    """`orders`: 3 partitions with 10, 20 and 30 records (values v0.., keys k0..), timestamps
    1000 ms apart from T0 + partition * 100_000; returns T0."""
    t0 = 1_700_000_000_000
    broker.store.create_topic("orders", 3)
    for p, n in {0: 10, 1: 20, 2: 30}.items():
        recs = [
            ProducerRecord(b"v%d" % i, b"k%d" % i, (("h", b"x"),), t0 + p * 100_000 + i * 1000)
            for i in range(n)
        ]
        broker.store.append_batch("orders", recs, partition=p)
    return t0


@pytest.fixture
def billing(broker, orders):
    """Group `billing` (Empty) with committed offsets orders-0: 5, orders-1: 20."""
    broker.coordinator.commit_offsets("billing", {("orders", 0): 5, ("orders", 1): 20})
    return "billing"


@pytest.fixture
def live_member(broker, billing):
    """A member joins `billing` (subscribed to orders): the group is no longer Empty."""
    co = broker.coordinator
    fut = co.join_group(
        "billing",
        "",
        client_id="worker",
        host="10.0.0.7",
        protocols=[("range", Subscription(("orders",)).encode())],
    )
    member = fut.result(5)
    yield member.member_id
    try:
        co.leave_group("billing", member.member_id)
    except Exception:  # noqa: BLE001 - the broker may be closed already
        pass
