"""@platformatic/kafka 1.35 (tests/protocol/node) against the listener. It names topics by id
in Fetch (v13+: it sends the id even in v12's name field), so before topic ids were served its
consumers never read a record; its describeGroups could not decode re-encoded member bytes."""

from __future__ import annotations

from tests.protocol import e2e
from tests.protocol.nodejs import run_node

PLATFORMATIC = ("@platformatic/kafka",)


def test_admin_produce_every_codec_and_a_rebalancing_group_of_two(broker, bootstrap):
    options = e2e.scenario("pk-orders", "pk-group")
    out = run_node("platformatic_e2e.mjs", bootstrap, options, packages=PLATFORMATIC, timeout=180)
    e2e.check(broker, options, out)
    # describeGroups, while both members were in: each member's own subscription and
    # assignment, decoded by the client itself
    described = out["described"]
    assert (described["state"], described["protocolType"]) == ("STABLE", "consumer")
    members = sorted(described["members"], key=lambda m: m["clientId"])
    assert [m["clientId"] for m in members] == ["pk-consumer-1", "pk-consumer-2"]
    assert all(m["topics"] == ["pk-orders"] for m in members)
    assigned = {
        m["clientId"]: sorted(p for a in m["assigned"] for p in a["partitions"]) for m in members
    }
    assert assigned == out["assignments"]
    assert out["emptyGroup"] == "EMPTY"
