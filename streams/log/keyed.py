"""A keyed, compacted, single-partition topic of a `LogStore` read as a table's history: what
the broker's own state topics (the schema registry's ``_schemas``, the ACLs' ``__acls``) are
kept in. `KeyedLog` is the seam (a test may give a list); `StoreKeyedLog` is the store's.

Its owner folds `records` at start (the last value of each key wins, None deletes) and then
appends each change; the topic is compacted, so it stays the size of the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

COMPACTED = {"cleanup.policy": "compact", "retention.ms": "-1"}


class KeyedLog(Protocol):
    def records(self) -> Iterable[tuple[bytes, bytes | None]]:
        """Every (key, value) in log order, from the start."""
        ...

    def append(self, key: bytes, value: bytes | None) -> None:
        """Durably (as the topic's flush policy says) append one record."""
        ...


class StoreKeyedLog:
    """`KeyedLog` over `topic` of a ``streams.log.LogStore``, created (one partition, with
    `config`) when missing."""

    def __init__(self, store, topic: str, config: Mapping[str, str] = COMPACTED):
        from streams.errors import TopicAlreadyExists

        self._store, self._topic = store, topic
        if topic not in store.list_topics():
            try:
                store.create_topic(topic, 1, dict(config))
            except TopicAlreadyExists:
                pass

    def records(self) -> Iterable[tuple[bytes, bytes | None]]:
        offset, end = self._store.offsets(self._topic, 0)
        while offset < end:
            batch = self._store.read(self._topic, 0, offset, 1000, 8 << 20)
            if not batch:
                return
            for r in batch:
                yield r.key or b"", r.value
            offset = batch[-1].offset + 1

    def append(self, key: bytes, value: bytes | None) -> None:
        self._store.append(self._topic, value, key=key, partition=0)
