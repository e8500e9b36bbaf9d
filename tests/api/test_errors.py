"""The error body and the status of every engine error, including the server's own failures."""

from __future__ import annotations

import pytest

from brokerui.api.errors import DOMAIN_STATUS, status_for
from streams import errors as se
from streams.cluster import LocalCluster
from tests.api.conftest import API
from tests.api.test_topics import error


@pytest.mark.parametrize(
    "exc, status",
    [
        (se.UnknownTopic("t"), 404),
        (se.UnknownPartition("t", 3, 1), 404),
        (se.UnknownGroup("g"), 404),
        (se.TopicAlreadyExists("t"), 409),
        (se.GroupNotEmpty("g", "Stable", ["m"]), 409),
        (se.RebalanceInProgress("r"), 409),
        (se.InvalidConfig("k", "v", "bad"), 400),
        (se.InvalidTopicName("n"), 400),
        (se.InvalidPartitions("p"), 400),
        (se.InvalidRecord("r"), 400),
        (se.InvalidResetSpec("r"), 400),
        (se.OffsetOutOfRange("t", 0, 9, 1, 5), 416),
        (se.RecordTooLarge("big"), 413),
        (se.InvalidSessionTimeout("s"), 400),
        (se.CorruptRecord("c"), 500),
        (se.StoreClosed("s"), 503),
        (se.DataDirLocked("/d", 1), 503),
    ],
)
def test_status_of_every_engine_error(exc, status):
    assert status_for(exc) == status


def test_every_engine_error_class_has_a_status():
    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for cls in subclasses(se.TidelogError):
        assert any(base in DOMAIN_STATUS for base in cls.__mro__), cls
        assert cls.code != se.TidelogError.code, cls


def test_a_bug_is_a_json_500_not_a_page(view, orders, monkeypatch):
    def boom(self, name):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(LocalCluster, "describe_topic", boom)
    err = error(view.get(f"{API}/topics/orders"), 500)
    assert err["code"] == "internal_error" and "secret" not in err["message"]


@pytest.mark.parametrize(
    "exc, status, code",
    [
        (se.StoreClosed("the log store at /x is closed"), 503, "store_closed"),
        (se.CorruptRecord("bad crc at 7"), 500, "corrupt_record"),
    ],
)
def test_server_side_engine_errors(view, orders, monkeypatch, exc, status, code):
    def fail(self, name):
        raise exc

    monkeypatch.setattr(LocalCluster, "describe_topic", fail)
    err = error(view.get(f"{API}/topics/orders"), status)
    assert err["code"] == code and set(err) == {"code", "message"}
