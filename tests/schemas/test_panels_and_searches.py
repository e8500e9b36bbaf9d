"""Panels over registry-encoded data: a panel's field paths are checked against decoded Avro
records, and its job aggregates their decoded fields; records it cannot decode count as
unreadable, as records that are not JSON do."""

from __future__ import annotations

import json

from streams.processing.panels import PanelJobs, PanelSpec
from streams.processing.panels.sample import check_sample
from streams.processing.testing import ManualClock
from streams.schemas.mapping import TopicReading
from streams.schemas.serdes import Avro
from streams.schemas.wire import encode_header

T0 = 1_767_225_600_000
ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "country", "type": "string"}, {"name": "total", "type": "double"},
    {"name": "ts", "type": "long"}]}  # fmt: skip


def test_a_panel_sums_decoded_avro_fields(store, registry):
    store.create_topic("orders", partitions=1)
    serde = Avro("orders-value", ORDER, registry=registry)
    for country, total, dt in [("DE", 10.0, 1000), ("FR", 2.0, 2000), ("DE", 3.0, 3000)]:
        value = serde.serialize({"country": country, "total": total, "ts": T0 + dt})
        store.append("orders", value, partition=0, timestamp_ms=T0 + dt)
    store.append("orders", encode_header(77) + b"\x00", partition=0, timestamp_ms=T0 + 4000)
    spec = PanelSpec("orders", "sum", value_field="total", group_by="country", time_field="ts")
    values = [r.value for r in store.read("orders", 0, 0, 10)]
    assert check_sample(spec, values[:3], registry.decoder) == []
    without = check_sample(spec, values[:3])  # no registry: "not JSON documents"
    assert without and "not JSON" in without[0].reason

    clock = ManualClock(T0 + 60_000)
    jobs = PanelJobs(store, clock=clock, reading=TopicReading(registry.decoder))
    jobs.ensure("p", spec)
    jobs.poll_once()
    snap = jobs.snapshot("p")
    assert (snap.records_read, snap.parse_errors) == (4, 1)  # the unknown id is unreadable
    sums = {r.key: r.values["sum"] for r in snap.results}
    assert sums == {"DE": 13.0, "FR": 2.0}
    assert json.dumps(sums)


def test_a_saved_search_matches_decoded_avro_events(store, registry):
    from streams.jobs.saved import SavedSearches
    from streams.schemas.serdes import release_registry, use_registry

    store.create_topic("pays", partitions=1)
    serde = Avro("pays-value", ORDER, registry=registry)
    use_registry(registry)  # as the broker does for the jobs in its process
    try:
        saved = SavedSearches(store)
        search = saved.save(name="big DE", topic="pays", query="country:DE AND total:[5 TO *]")
        for country, total in [("DE", 10.0), ("FR", 20.0), ("DE", 1.0)]:
            value = serde.serialize({"country": country, "total": total, "ts": T0})
            store.append("pays", value, partition=0, timestamp_ms=T0)
        saved.poll_once()
        saved.poll_once()
        matches = saved.recent_matches(search.id)
        assert [m["event"] for m in matches] == [{"country": "DE", "total": 10.0, "ts": T0}]
        assert saved.errors == {}
    finally:
        release_registry(registry)
