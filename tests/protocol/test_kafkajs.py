"""KafkaJS 2.2.4 (tests/protocol/node) against the listener."""

from __future__ import annotations

from tests.protocol.nodejs import run_node

KAFKAJS = ("kafkajs",)


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
