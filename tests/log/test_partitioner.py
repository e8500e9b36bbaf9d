"""Key -> partition exactly as Kafka's Java client; unkeyed records spread evenly."""

from __future__ import annotations

from collections import Counter

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from streams.log import LogStore, ProducerRecord
from streams.log.partitioner import murmur2, partition_for_key

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key, expected", sorted(JAVA_VECTORS.items()))
def test_murmur2_matches_kafka_java_vectors(key, expected):
    assert murmur2(key) == expected


def test_murmur2_agrees_with_kafka_python_on_many_keys():
    for i in range(2000):
        key = (b"user-%d" % i) * (i % 7 + 1)
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_partition_is_positive_murmur2_mod_n():
    # toPositive(-973932308) = 1173551340; % 10 = 0; % 7 = 1173551340 % 7
    assert partition_for_key(b"21", 10) == (-973932308 & 0x7FFFFFFF) % 10
    assert partition_for_key(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7


def test_store_routes_keyed_records_by_murmur2(tmp_path):
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("t", 6)
        for i in range(200):
            key = b"customer-%d" % i
            res = store.append_batch("t", [ProducerRecord(b"v", key)])[0]
            assert res.partition == partition_for_key(key, 6)
            assert store.read("t", res.partition, res.offset, 1)[0].key == key


def test_unkeyed_batches_stick_to_one_partition_and_spread_evenly(tmp_path):
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("t", 4, {"flush.messages": "1000000"})
        per_batch = []
        for _ in range(40):
            res = store.append_batch("t", [ProducerRecord(b"x")] * 10)
            assert len({r.partition for r in res}) == 1  # sticky within a batch
            per_batch.append(res[0].partition)
        assert Counter(per_batch) == {0: 10, 1: 10, 2: 10, 3: 10}
        singles = Counter(store.append("t", b"y").partition for _ in range(400))
        assert singles == {0: 100, 1: 100, 2: 100, 3: 100}
