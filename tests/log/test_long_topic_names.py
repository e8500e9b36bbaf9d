"""Topic names up to Kafka's 249 characters on disk (issue 10, item 9), and creates that fail
halfway leaving nothing behind."""

from __future__ import annotations

import errno
import os

import pytest

from streams.errors import InvalidTopicName, StorageError
from streams.log import LogStore
from streams.log import checkpoint as checkpoint_file
from streams.log.store import MAX_PARTITIONS


def names_on_disk(path) -> list[str]:
    return sorted(n for _, dirs, files in os.walk(path) for n in dirs + files)


@pytest.mark.parametrize("length", [247, 248, 249])
def test_longest_names_are_stored_reopened_grown_and_deleted(tmp_path, length):
    name = ("x." + "y" * length)[:length]
    with LogStore.open(str(tmp_path), background=False) as store:
        store.create_topic(name, 3, {"retention.ms": "60000"})
        store.append(name, b"first", partition=2)
        store.add_partitions(name, 12)
        store.append(name, b"last", partition=store.partition_count(name) - 1)
        store.alter_config(name, {"retention.ms": "120000"})
    with LogStore.open(str(tmp_path), background=False) as store:
        last = store.partition_count(name) - 1
        assert store.read(name, 2, 0)[0].value == b"first"
        assert store.read(name, last, 0)[0].value == b"last"
        assert store.describe_topic(name).overrides == {"retention.ms": "120000"}
        store.delete_topic(name)
    with LogStore.open(str(tmp_path), background=False) as store:
        assert store.list_topics() == []
    assert [n for n in names_on_disk(tmp_path) if "yyyy" in n] == []
    assert len(f"{name}-{MAX_PARTITIONS - 1}") <= 255  # the last partition's directory fits


def test_a_name_over_the_limit_is_refused_before_anything_is_written(tmp_path):
    with LogStore.open(str(tmp_path), background=False) as store:
        before = names_on_disk(tmp_path)
        with pytest.raises(InvalidTopicName, match="250 characters long; the limit is 249"):
            store.create_topic("z" * 250, 2)
        assert names_on_disk(tmp_path) == before


@pytest.mark.parametrize("action", ["create", "add-partitions", "alter-config"])
def test_a_refused_metadata_write_leaves_the_topic_as_it_was(tmp_path, monkeypatch, action):
    """The disk refuses the metadata file (ENOSPC): a StorageError naming the action, no
    partition directory left behind, the topic unchanged in memory and after a reopen."""
    with LogStore.open(str(tmp_path), background=False) as store:
        if action != "create":
            store.create_topic("t", 2)
        before = names_on_disk(tmp_path)

        def full(path, data):
            raise OSError(errno.ENOSPC, "No space left on device", path)

        monkeypatch.setattr(checkpoint_file, "write_atomic", full)
        with pytest.raises(StorageError, match="No space left on device") as refused:
            if action == "create":
                store.create_topic("t", 4)
            elif action == "add-partitions":
                store.add_partitions("t", 5)
            else:
                store.alter_config("t", {"retention.ms": "1000"})
        assert refused.value.errno == errno.ENOSPC
        monkeypatch.undo()
        assert names_on_disk(tmp_path) == before
        if action == "create":
            assert store.list_topics() == []
        else:
            assert store.partition_count("t") == 2
            assert store.describe_topic("t").overrides == {}
    with LogStore.open(str(tmp_path), background=False) as store:
        assert store.list_topics() == ([] if action == "create" else ["t"])


def test_temporary_files_of_interrupted_writes_are_removed_at_open(tmp_path):
    with LogStore.open(str(tmp_path), background=False) as store:
        store.create_topic("t", 1)
    leftover = checkpoint_file.tmp_path(str(tmp_path / ".meta" / "topics" / ("t" * 249 + ".json")))
    assert len(os.path.basename(leftover)) < 255
    open(leftover, "wb").close()
    with LogStore.open(str(tmp_path), background=False) as store:
        assert store.list_topics() == ["t"]
    assert not os.path.exists(leftover)
