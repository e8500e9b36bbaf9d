"""Logged-in clients for the console tests (the broker and users come from tests/conftest.py)."""

from __future__ import annotations

import pytest


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
