"""Topic ids (KIP-516): one per topic, kept across restarts, new for a re-created topic."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from streams.errors import UnknownTopic, UnknownTopicId
from streams.log import LogStore


def test_ids_are_stable_across_restarts_and_new_on_recreate(tmp_path):
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("a", 2)
        store.create_topic("b")
        a, b = store.topic_id("a"), store.topic_id("b")
        assert a != b and uuid.UUID(hex=a).int and len(a) == 32
        assert store.describe_topic("a").topic_id == a
        assert (store.topic_name(a), store.topic_name(b.upper())) == ("a", "b")
    with LogStore.open(tmp_path, background=False) as store:
        assert (store.topic_id("a"), store.topic_id("b")) == (a, b)
        store.delete_topic("a")
        with pytest.raises(UnknownTopicId):
            store.topic_name(a)
        with pytest.raises(UnknownTopic):
            store.topic_id("a")
        store.create_topic("a")
        again = store.topic_id("a")
        assert again != a and store.topic_name(again) == "a"
    with LogStore.open(tmp_path, background=False) as store:
        assert store.topic_id("a") == again
        with pytest.raises(UnknownTopicId):
            store.topic_name(a)


def test_a_topic_without_an_id_gets_one_on_open_and_keeps_it(tmp_path):
    """Metadata written without an id (or with a broken one) is given an id, written back."""
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("old")
        store.create_topic("odd")
        store.append("old", b"kept")
    for name, damaged in (("old", None), ("odd", "not-a-uuid")):
        path = os.path.join(tmp_path, ".meta", "topics", f"{name}.json")
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
        if damaged is None:
            del meta["id"]
        else:
            meta["id"] = damaged
        with open(path, "w", encoding="utf-8") as f:
            json.dump(meta, f)
    with LogStore.open(tmp_path, background=False) as store:
        given = {n: store.topic_id(n) for n in ("old", "odd")}
        assert all(uuid.UUID(hex=i).int for i in given.values())
        assert [r.value for r in store.read("old", 0, 0)] == [b"kept"]
    with LogStore.open(tmp_path, background=False) as store:
        assert {n: store.topic_id(n) for n in ("old", "odd")} == given
