"""A group's health in the JSON API: Burrow's status with its reason and the lag figures, per
group and per partition, as the console shows them."""

from __future__ import annotations

import time

from tests.api.conftest import API


def test_describe_carries_the_groups_health(view, billing, broker):
    for _ in range(3):  # billing commits the same offsets, with lag on orders-0: a stall
        broker.coordinator.commit_offsets("billing", {("orders", 0): 5, ("orders", 1): 20})
        broker.health.sample()
        time.sleep(0.005)  # the next commit is a new one (another commit time)
    health = view.get(f"{API}/groups/billing").json()["health"]
    assert health["status"] == "STALL"
    assert health["reason"].startswith("orders-0: 3 commits at offset 5")
    rows = {p["partition"]: p for p in health["partitions"]}
    assert rows[0]["status"] == "STALL" and rows[0]["commits"] == 3
    assert rows[1]["status"] == "OK" and rows[1]["lag_age_ms"] == 0
    assert rows[0]["lag_age_ms"] >= 0 and health["catch_up_s"] is None
    assert "not gaining" in health["catch_up_note"]
