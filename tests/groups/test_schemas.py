"""Group state in Kafka's byte layouts, checked against a real Kafka client's codecs."""

from __future__ import annotations

from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from streams.groups import schemas


def test_subscription_bytes_identical_to_kafka_python():
    ours = schemas.Subscription(("x", "y"), b"u", {"x": [3]}).encode()
    theirs = ConsumerProtocolSubscription(
        version=1, topics=["x", "y"], user_data=b"u", owned_partitions=[("x", [3])]
    ).encode()
    assert ours == theirs
    assert schemas.Subscription.decode(theirs).topics == ("x", "y")


def test_assignment_bytes_identical_to_kafka_python():
    theirs = ConsumerProtocolAssignment(
        version=1, assigned_partitions=[("t", [0, 2])], user_data=None
    ).encode()
    assert schemas.Assignment({"t": [0, 2]}).encode() == theirs
    assert schemas.Assignment.decode(theirs).partitions == {"t": [0, 2]}


def test_group_partition_uses_java_string_hash():
    assert schemas.java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert schemas.java_string_hash("") == 0
    assert schemas.java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert schemas.offsets_partition_for("polygenelubricants") == 0  # Utils.abs(MIN) = 0
    assert schemas.offsets_partition_for("hello") == 99162322 % 50


def test_offset_commit_layouts_round_trip():
    key = schemas.OffsetCommitKey("g", "orders", 3).encode()
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x06orders" + b"\x00\x00\x00\x03"
    assert schemas.decode_key(key) == schemas.OffsetCommitKey("g", "orders", 3)
    value = schemas.OffsetCommitValue(42, "meta", 1234).encode()
    assert value[:2] == b"\x00\x03" and len(value) == 2 + 8 + 4 + 2 + 4 + 8
    assert schemas.OffsetCommitValue.decode(value) == schemas.OffsetCommitValue(42, "meta", 1234)
    meta = schemas.GroupMetadataValue(
        "consumer",
        5,
        "range",
        "m1",
        99,
        (schemas.MemberMetadata("m1", "c", "h", 30000, 10000, b"s", b"a"),),
    )
    assert schemas.GroupMetadataValue.decode(meta.encode()) == meta
    assert schemas.decode_key(schemas.GroupMetadataKey("g").encode()) == schemas.GroupMetadataKey(
        "g"
    )
