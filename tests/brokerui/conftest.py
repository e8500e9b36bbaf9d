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
