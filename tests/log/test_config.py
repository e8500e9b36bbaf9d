"""Topic names and configs are validated as Kafka does, with messages people can act on."""

from __future__ import annotations

import pytest

from streams.errors import InvalidConfig, InvalidPartitions, InvalidTopicName, TopicAlreadyExists
from streams.log import LogStore, TopicConfig, validate_topic_name


@pytest.mark.parametrize(
    "name", ["a", "orders.v1", "page_views-2", "A" * 249, "__consumer_offsets"]
)
def test_valid_topic_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize(
    "name, message",
    [
        ("", "empty"),
        (".", "cannot be"),
        ("..", "cannot be"),
        ("a" * 250, "limit is 249"),
        ("with space", "' '"),
        ("sl/ash", "'/'"),
        ("ünï", "allowed are"),
    ],
)
def test_invalid_topic_names(name, message):
    with pytest.raises(InvalidTopicName, match=message):
        validate_topic_name(name)


def test_defaults_and_typed_values():
    cfg = TopicConfig.from_mapping({"retention.ms": "3600000", "cleanup.policy": "delete,compact"})
    assert cfg.get("retention.ms") == 3_600_000
    assert cfg.get("cleanup.policy") == "compact,delete" and cfg.compact and cfg.delete
    assert cfg.get("segment.bytes") == 1 << 30 and cfg.get("flush.messages") == 1
    assert cfg.as_dict()["max.message.bytes"] == "1048588"
    assert cfg.codec is None and TopicConfig.from_mapping({"compression.type": "zstd"}).codec == 4


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("retention.ms", "soon", "must be an integer"),
        ("retention.ms", "-2", "between -1 and"),
        ("segment.bytes", "10", "between 1024 and"),
        ("cleanup.policy", "forever", "delete, compact or compact,delete"),
        ("compression.type", "brotli", "must be one of"),
        ("message.timestamp.type", "Now", "CreateTime, LogAppendTime"),
        ("min.cleanable.dirty.ratio", "2", "between 0 and 1"),
        ("flush.messages", "0", "between 1 and"),
        ("retention.hours", "1", "unknown topic config"),
    ],
)
def test_invalid_configs_name_key_value_and_reason(key, value, message):
    with pytest.raises(InvalidConfig, match=message) as info:
        TopicConfig.from_mapping({key: value})
    assert info.value.key == key and key in str(info.value) and value in str(info.value)


def test_store_topic_admin(tmp_path):
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("orders", 2, {"retention.ms": 1000})
        with pytest.raises(TopicAlreadyExists):
            store.create_topic("orders", 1)
        with pytest.raises(InvalidConfig):
            store.create_topic("bad", 1, {"segment.bytes": "x"})
        assert "bad" not in store.list_topics()
        with pytest.raises(InvalidPartitions, match="never removed"):
            store.add_partitions("orders", 1)
        with pytest.raises(InvalidPartitions, match="already has 2"):
            store.add_partitions("orders", 2)
        with pytest.raises(InvalidPartitions):
            store.create_topic("zero", 0)
        assert len(store.add_partitions("orders", 5).partitions) == 5
        desc = store.alter_config("orders", {"cleanup.policy": "compact"}, delete=["retention.ms"])
        assert (
            desc.config["cleanup.policy"] == "compact"
            and desc.config["retention.ms"] == "604800000"
        )
        assert desc.overrides == {"cleanup.policy": "compact"}
        store.create_topic("__internal", 1)
        assert store.list_topics(include_internal=False) == ["orders"]
    with LogStore.open(tmp_path, background=False) as store:  # all of it survives a restart
        desc = store.describe_topic("orders")
        assert len(desc.partitions) == 5 and desc.overrides == {"cleanup.policy": "compact"}
        assert store.describe_topic("__internal").internal
        store.delete_topic("orders")
        assert store.list_topics() == ["__internal"]
        assert not list(tmp_path.glob("orders-*"))
    with LogStore.open(tmp_path, background=False) as store:
        assert store.list_topics() == ["__internal"]
