"""Fixtures for the web layer: a process-wide broker on a fresh data directory."""

from __future__ import annotations

import pytest

from brokerui.broker import close_broker, get_broker


@pytest.fixture
def broker(settings, tmp_path):
    """The broker `get_broker()` returns, on an empty temporary data dir, demo traffic off."""
    close_broker()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    yield get_broker()
    close_broker()


@pytest.fixture
def operator(db):
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user("olivia", password="operator-pass-123")
    user.groups.add(Group.objects.get(name="operator"))
    return user


@pytest.fixture
def viewer(db):
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user("victor", password="viewer-pass-123")
    user.groups.add(Group.objects.get(name="viewer"))
    return user


@pytest.fixture
def operator_client(client, operator):
    """A logged-in operator (may change things)."""
    client.force_login(operator)
    return client


@pytest.fixture
def viewer_client(client, viewer):
    """A logged-in viewer (read only)."""
    client.force_login(viewer)
    return client
