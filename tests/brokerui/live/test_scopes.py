"""Which page draws which series, and Channels-safe group names for any topic or group id."""

from __future__ import annotations

import re

from brokerui.console.live.scopes import Scope, learn_readers, matcher, route
from streams.broker.metrics import series

GROUP_NAME = re.compile(r"^[A-Za-z0-9._-]{1,99}$")


def test_group_names_are_valid_for_any_name():
    names = ["orders", "team/<b>x</b> ünïcode", "x" * 300, ""]
    groups = {
        Scope(kind, name).group_name for kind in ("topic", "group", "panel") for name in names
    }
    assert all(GROUP_NAME.match(g) for g in groups)
    assert len(groups) == 3 * len(names)  # no two scopes share a group
    assert Scope("overview").group_name == "live.overview"


def test_routes():
    readers: dict[str, set[str]] = {}
    learn_readers([series("group_lag", "billing", "orders", 0)], readers)
    assert readers == {"orders": {"billing"}}
    assert route(series("records_in"), readers) == [Scope("overview")]
    assert route(series("records_in", "orders"), readers) == [
        Scope("overview"),
        Scope("topic", "orders"),
        Scope("group", "billing"),
    ]
    assert route(series("records_in", "orders", 1), readers) == [Scope("topic", "orders")]
    assert route(series("bytes_out", "orders", 1), readers) == [Scope("topic", "orders")]
    assert route(series("group_records_et", "a/b"), readers) == [Scope("group", "a/b")]
    assert route(series("group_committed", "billing", "orders", 0), readers) == []
    # a topic page updates its partitions table's end offsets live
    assert route(series("end_offset", "orders", 0), readers) == [Scope("topic", "orders")]


def test_a_group_backfill_includes_the_produce_rate_of_its_topics_only():
    match = matcher(Scope("group", "billing"), ["orders"])
    assert match(series("records_in", "orders"))
    assert match(series("group_lag", "billing", "orders", 2))
    assert not match(series("records_in", "clicks"))
    assert not match(series("group_lag", "other"))
