"""The store's topic defaults (Kafka's broker-level ``log.flush.interval.*``): a key a topic
leaves unset takes the store's default, a key it sets wins, and the defaults are not stored
(each open says them). Under ``KAFKA_FLUSH_DEFAULTS`` (``python -m streams.protocol --flush
kafka``) neither records nor transaction markers are fdatasynced before they are acknowledged;
under the built-in policy both are.

``os.fdatasync`` is wrapped by a recorder that calls the real one (tests/log/test_durability).
"""

from __future__ import annotations

import os

import pytest

from streams.errors import InvalidConfig
from streams.log import KAFKA_FLUSH_DEFAULTS, LogStore, ProducerRecord
from streams.log.config import LONG_MAX
from streams.log.records import ATTR_TRANSACTIONAL, build_batch
from tests.log.test_durability import SyncLog


def synced_files(syncs: SyncLog) -> set[str]:
    return {os.path.basename(path) for path, _ in syncs.syncs}


def test_topics_take_the_store_defaults_unless_they_set_the_key(tmp_path, monkeypatch):
    with LogStore.open(str(tmp_path), background=False, topic_defaults=KAFKA_FLUSH_DEFAULTS) as s:
        s.create_topic("relaxed", 1)
        s.create_topic("strict", 1, {"flush.messages": "1"})
        relaxed = s.describe_topic("relaxed")
        assert relaxed.config["flush.messages"] == str(LONG_MAX)
        assert relaxed.config["flush.ms"] == "1000"
        assert "flush.messages" not in relaxed.overrides  # a default, not the topic's own
        syncs = SyncLog(monkeypatch)
        s.append("relaxed", b"a", partition=0)
        assert len(syncs) == 0, "acknowledged after an fdatasync under Kafka's flush policy"
        s.append("strict", b"b", partition=0)
        assert len(syncs) == 1, "the topic's own flush.messages=1 must win over the default"
        # resetting the topic's key falls back to the store's default, not the built-in one
        s.alter_config("strict", delete=("flush.messages",))
        assert s.describe_topic("strict").config["flush.messages"] == str(LONG_MAX)
        monkeypatch.undo()
    with LogStore.open(str(tmp_path), background=False) as s:  # defaults are not stored
        assert s.describe_topic("relaxed").config["flush.messages"] == "1"
        assert s.read("relaxed", 0, 0)[0].value == b"a"


def test_a_bad_default_is_refused(tmp_path):
    with pytest.raises(InvalidConfig):
        LogStore.open(str(tmp_path), background=False, topic_defaults={"flush.messages": "0"})
    with pytest.raises(InvalidConfig):
        LogStore.open(str(tmp_path), background=False, topic_defaults={"flush.mesages": "5"})


@pytest.mark.parametrize("defaults", [None, KAFKA_FLUSH_DEFAULTS], ids=["fsync", "kafka"])
def test_markers_are_synced_as_the_flush_policy_wants(tmp_path, monkeypatch, defaults):
    with LogStore.open(str(tmp_path), background=False, topic_defaults=defaults) as s:
        s.create_topic("t", 1)
        plog = s.partition_log("t", 0)
        pid = s.allocate_producer_id()
        data = build_batch(
            [ProducerRecord(b"v")], now_ms=s.clock(), producer_id=pid, producer_epoch=0,
            base_sequence=0, attributes_extra=ATTR_TRANSACTIONAL,
        )  # fmt: skip
        s.produce("t", 0, data)
        assert plog.last_stable_offset == 0  # the transaction is open
        syncs = SyncLog(monkeypatch)
        offset = s.write_marker("t", 0, pid, 0, commit=True)
        assert plog.last_stable_offset == offset + 1
        log_syncs = {f for f in synced_files(syncs) if f.endswith(".log")}
        if defaults is None:
            assert log_syncs, "the COMMIT marker was not fdatasynced under flush.messages=1"
        else:
            assert not log_syncs, "the COMMIT marker was fdatasynced under Kafka's policy"
        monkeypatch.undo()
    # either way it is in the log after a clean close and reopen
    with LogStore.open(str(tmp_path), background=False, topic_defaults=defaults) as s:
        assert s.partition_log("t", 0).last_stable_offset == offset + 1
        assert [r.value for r in s.read("t", 0, 0, committed=True)] == [b"v"]
