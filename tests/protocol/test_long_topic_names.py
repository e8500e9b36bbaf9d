"""Topic names of 247 to 249 characters (Kafka's limit) over the Kafka protocol: created by the
AdminClient and by kcat's first produce (auto-create), written, read, listed and deleted, with
nothing left on disk afterwards; a 250-character name is refused with Kafka's error and the
connection stays up. (Issue 10, item 9: these names used to fail with ENAMETOOLONG on the
metadata temp file, drop the connection and leave partition directories behind.)"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.system_programs import require_program

DEADLINE_S = 30


def _name(length: int, letter: str = "t") -> str:
    return (f"long.{length}_" + letter * length)[:length]


def _kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kcat", "-b", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def _left_on_disk(store, name: str) -> list[str]:
    """Everything in the data directory that still carries (a prefix of) the topic's name."""
    stem = name[:200]
    found = []
    for directory, dirs, files in os.walk(store.path):
        found += [os.path.join(directory, n) for n in dirs + files if stem in n]
    return found


@pytest.mark.parametrize("length", [247, 248, 249])
def test_admin_client_creates_uses_and_deletes_long_names(broker, bootstrap, length):
    name = _name(length)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(timeout=DEADLINE_S)
    admin.create_partitions([NewPartitions(name, 12)])[name].result(timeout=DEADLINE_S)
    assert broker.store.partition_count(name) == 12

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors = []
    for p in (0, 11):
        producer.produce(
            name,
            value=b"v%d" % p,
            partition=p,
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
    assert producer.flush(DEADLINE_S) == 0 and errors == []
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "long-names", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([name])
    got = set()
    while len(got) < 2:
        msg = consumer.poll(DEADLINE_S)
        assert msg is not None and msg.error() is None, msg and msg.error()
        got.add((msg.partition(), msg.value()))
    consumer.close()
    assert got == {(0, b"v0"), (11, b"v11")}

    admin.delete_topics([name])[name].result(timeout=DEADLINE_S)
    assert name not in broker.store.list_topics()
    assert _left_on_disk(broker.store, name) == []


def test_kcat_auto_creates_a_249_character_topic_on_produce(broker, bootstrap):
    require_program("kcat")
    name = _name(249, "k")
    _kcat(bootstrap, "-P", "-t", name, "-K:", stdin="a:1\nb:2\n")
    out = _kcat(bootstrap, "-C", "-t", name, "-o", "beginning", "-e", "-f", "%k=%s\n")
    assert out.splitlines() == ["a=1", "b=2"]
    listed = json.loads(_kcat(bootstrap, "-L", "-J"))
    assert name in [t["topic"] for t in listed["topics"]]

    broker.close()  # and the store reopens with it
    from tests.protocol.conftest import open_broker

    reopened = open_broker(broker.store.path)
    try:
        assert reopened.store.offsets(name, 0) == (0, 2)
    finally:
        reopened.close()


def test_a_250_character_name_is_refused_and_leaves_nothing(broker, bootstrap):
    name = _name(250)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with pytest.raises(KafkaException, match="TOPIC_EXCEPTION") as refused:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=DEADLINE_S)
    assert "250 characters long; the limit is 249" in str(refused.value)
    # the same connection still answers
    ok = _name(249, "o")
    admin.create_topics([NewTopic(ok, 1, 1)])[ok].result(timeout=DEADLINE_S)
    assert name not in broker.store.list_topics()
    assert _left_on_disk(broker.store, name) == []
