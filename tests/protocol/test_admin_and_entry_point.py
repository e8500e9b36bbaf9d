"""kafka-python's admin client over the remaining admin and offset APIs (DescribeCluster,
DeleteRecords, OffsetFetch for all partitions, OffsetDelete, DescribeGroups, ListGroups,
AlterConfigs, CreateTopics validate-only, DescribeConfigs of the broker), topic auto-creation
settings, and ``python -m streams.protocol`` as a process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from streams.protocol import codec
from tests.protocol.conftest import open_broker
from tests.protocol.wire import WireClient

REPO_DIR = Path(__file__).resolve().parents[2]
UNKNOWN_TOPIC_OR_PARTITION = 3


def test_kafka_python_admin(broker, bootstrap):
    broker.store.create_topic("t", 2)
    for i in range(10):
        broker.store.append("t", b"%d" % i, partition=0)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        cluster = admin.describe_cluster()
        assert (cluster["controller_id"], cluster["brokers"][0]["port"]) == (
            0,
            broker.kafka_address[1],
        )

        deleted = admin.delete_records({TopicPartition("t", 0): 4})
        assert deleted[TopicPartition("t", 0)]["low_watermark"] == 4
        assert broker.store.offsets("t", 0) == (4, 10)

        broker.coordinator.commit_offsets("g", {("t", 0): 5, ("t", 1): 0})
        listed = admin.list_group_offsets({"g": None})["g"]
        assert {tp.partition: o.offset for tp, o in listed.items()} == {0: 5, 1: 0}
        admin.delete_group_offsets("g", [TopicPartition("t", 0)])
        assert {tp: c.offset for tp, c in broker.coordinator.committed("g").items()} == {
            ("t", 1): 0
        }
        described = admin.describe_groups(["g", "never-seen"])
        assert (described["g"]["group_state"], described["never-seen"]["group_state"]) == (
            "Empty",
            "Dead",
        )
        assert "g" in {g["group_id"] for g in admin.list_groups()}

        admin.create_topics([NewTopic("checked-only", 3, 1)], validate_only=True)
        assert "checked-only" not in broker.store.list_topics()

        change = ConfigResource(ConfigResourceType.TOPIC, "t", configs={"retention.ms": "1234"})
        admin.alter_configs([change], incremental=False)
        assert broker.store.describe_topic("t").overrides == {"retention.ms": "1234"}
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")])
        assert configs["topic"]["t"]["retention.ms"]["value"] == "1234"
        brokers = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )
        assert brokers["broker"]["0"]["num.partitions"]["value"] == "1"
    finally:
        admin.close()


def test_auto_creation_uses_the_default_partition_count(tmp_path):
    broker = open_broker(tmp_path / "data", default_partitions=3)
    host, port = broker.kafka_address
    try:
        producer = KafkaProducer(bootstrap_servers=f"{host}:{port}")
        producer.send("fresh", b"x").get(timeout=30)
        producer.close()
        assert broker.store.partition_count("fresh") == 3
    finally:
        broker.close()


def test_auto_creation_can_be_switched_off(tmp_path):
    broker = open_broker(tmp_path / "data", auto_create_topics=False)
    host, port = broker.kafka_address
    try:
        with WireClient(f"{host}:{port}") as c:
            topic = codec.request_class(3).MetadataRequestTopic(name="absent", topic_id=None)
            req = c.call(3, 12, topics=[topic], allow_auto_topic_creation=True)
            assert [t.error_code for t in req.topics] == [UNKNOWN_TOPIC_OR_PARTITION]
        assert "absent" not in broker.store.list_topics()
    finally:
        broker.close()


def test_module_entry_point_serves_until_sigterm(tmp_path):
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.protocol", "--data-dir", str(data), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on 127.0.0.1:")
        bootstrap = line.removeprefix("listening on ")
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        meta = producer.send("from-process", b"hello").get(timeout=30)
        producer.close()
        assert (meta.topic, meta.offset) == ("from-process", 0)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert (data / ".clean-shutdown").exists()
    # kafka-python 3 is idempotent by default: its partition keeps its producer state
    assert (data / "from-process-0" / "producer-state.json").exists()


def test_a_taken_port_is_a_clear_error_and_leaves_the_data_dir_free(tmp_path, broker):
    taken = broker.kafka_address[1]
    with pytest.raises(OSError, match="address already in use"):
        open_broker(tmp_path / "other", port=taken)
    reopened = open_broker(tmp_path / "other")  # the failed open released the directory
    reopened.close()
