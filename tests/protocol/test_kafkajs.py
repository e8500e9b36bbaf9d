"""KafkaJS 2.2.4 (tests/protocol/node) against the listener."""

from __future__ import annotations

from tests.protocol import e2e
from tests.protocol.nodejs import run_node

KAFKAJS = ("kafkajs",)
KAFKAJS_CODECS = ("kafkajs", "kafkajs-snappy", "lz4-napi")


def test_reset_offsets_to_earliest_commits_minus_two_and_the_group_rereads(broker, bootstrap):
    """admin.resetOffsets({earliest: true}) commits -2, which Kafka stores (it used to be
    refused with INVALID_COMMIT_OFFSET_SIZE and KafkaJS retried for ever)."""
    out = run_node(
        "kafkajs_reset_offsets.js",
        bootstrap,
        {"topic": "reset-me", "groupId": "resetters"},
        packages=KAFKAJS,
        timeout=90,
    )
    values = sorted(f"v{i}" for i in range(10))
    assert out["first"] == values
    assert out["afterRead"] == {"0": "5", "1": "5"}
    assert out["raw"] == {"0": "-2", "1": "-2"}  # as stored: OffsetFetch returns the sentinel
    assert out["resolved"] == {"0": "0", "1": "0"}
    assert out["again"] == values
    committed = broker.coordinator.committed("resetters")
    assert {tp: c.offset for tp, c in committed.items()} == {("reset-me", 0): 5, ("reset-me", 1): 5}


def test_admin_produce_every_codec_and_a_rebalancing_group_of_two(broker, bootstrap):
    """The scenario @platformatic/kafka runs too: KafkaJS, which knows no topic ids, keeps
    working while the broker serves them."""
    options = e2e.scenario("kjs-orders", "kjs-group")
    out = run_node("kafkajs_e2e.js", bootstrap, options, packages=KAFKAJS_CODECS, timeout=180)
    e2e.check(broker, options, out)
    assert out["metadataPartitions"] == e2e.PARTITIONS
    described = out["described"]
    assert (described["state"], described["protocolType"]) == ("Stable", "consumer")
    assigned = [
        sorted(p for ps in m["assigned"].values() for p in ps) for m in described["members"]
    ]
    assert sorted(assigned) == sorted(out["assignments"].values())
    assert all(m["topics"] == ["kjs-orders"] for m in described["members"])
    assert out["emptyGroup"] == "Empty"
