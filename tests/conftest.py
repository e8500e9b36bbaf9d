"""Suite-wide pytest set-up, and the web layer's fixtures shared by tests/brokerui and tests/api.

Django is imported inside the fixtures only, so the engine's tests never load it.
"""

from __future__ import annotations

import functools
import os

import pytest

# The console starts a Kafka listener on 9092 by default; the suite's servers (in-process and the
# browser tests' subprocesses, which inherit this) must not compete for that port. Tests of the
# listener start their own on port 0 (tests/protocol).
os.environ.setdefault("TIDELOG_KAFKA_LISTENER", "0")
# ... nor for the schema registry's 8081: each server's registry takes a free port
os.environ.setdefault("TIDELOG_REGISTRY_PORT", "0")


def pytest_configure(config):
    """pytest-django loads Django's settings before this file is imported, so the default
    above reaches only the subprocesses; the in-process settings get it here (else a test that
    touches the broker without the `broker` fixture listens on 9092, and fails when something
    else on the machine holds that port)."""
    from django.conf import settings

    if settings.configured and os.environ["TIDELOG_KAFKA_LISTENER"] in ("0", "false", "no"):
        settings.TIDELOG_KAFKA_LISTENER = False
    if settings.configured:
        settings.TIDELOG_REGISTRY_PORT = int(os.environ["TIDELOG_REGISTRY_PORT"])


# Benchmarks run on demand (`make bench`), never as part of the test suite.
collect_ignore = ["bench"]


@pytest.fixture
def broker(settings, tmp_path):
    """The broker `get_broker()` returns, on an empty temporary data dir, demo traffic off."""
    from brokerui.broker import close_broker, get_broker

    close_broker()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    settings.TIDELOG_KAFKA_LISTENER = False
    yield get_broker()
    close_broker()


@functools.cache
def _password_hash(password: str) -> str:
    """`password` hashed by the console's own hasher (PBKDF2, about 0.3 s of CPU each), once per
    test process: the `operator` and `viewer` of ~800 tests share it (one salt for all of them)
    and still sign in through a real password check."""
    from django.contrib.auth.hashers import make_password

    return make_password(password)


def _user(name: str, password: str, role: str):
    from django.contrib.auth.models import Group, User

    # the row create_user(name, password=password) makes, less the repeated hashing
    user = User.objects.create(username=name, password=_password_hash(password))
    # get_or_create: a transactional test's flush empties the tables, the migration's roles too
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def operator(db):
    return _user("olivia", "operator-pass-123", "operator")


@pytest.fixture
def viewer(db):
    return _user("victor", "viewer-pass-123", "viewer")
