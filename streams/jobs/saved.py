"""``SavedSearches``: users' saved searches over the embedded log store, run as search jobs,
with a live feed of their matches (what the console's saved-search pages use).

- A saved search is a record of the compacted topic ``saved-searches`` (key = its id, value =
  ``{"query", "name", "topic", "created_ms"}``); deleting it writes a tombstone. ``save``
  validates the query first (``search.parse``: a ``QueryError`` with the position).
- For each topic that live searches name, a job ``saved-search-<topic>``
  (``stream(topic).search(queries="saved-searches", for_topic=topic).to(matches topic)``) runs
  on a ``Runner`` in this object's thread, committing its offsets under its name (so a restart
  goes on where it stopped). Matches land in ``saved-search-matches`` (key = the search id).
- ``subscribe(callback)`` calls `callback` with each batch of new matches (dicts ``{"query",
  "key", "event", "ts", "offset", "partition"}``) from that thread; callbacks must return at
  once (the console's relay only schedules a delivery). ``recent_matches`` reads the newest
  matches of one search back from the matches topic.

Events of a searched topic that are not JSON stop its job with a ``RecordError`` (kept in
``status()``, nothing is committed past it); the other topics' jobs go on. A topic whose values
have a subject in the schema registry (``<topic>-value``) is searched decoded (Avro, Protobuf,
JSON Schema through the registry).

Thread-safety: ``save``/``delete``/``list``/``get``/``recent_matches``/``subscribe`` may be
called from any thread (the log store locks; the subscriber list is locked); the runners are
driven by the one background thread only.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from streams.errors import TidelogError, UnknownTopic
from streams.jobs.job import Job
from streams.jobs.runner import Runner
from streams.jobs.search import QueryError, explain, index_keys, parse
from streams.jobs.serde import JSON
from streams.log import LogStore

log = logging.getLogger(__name__)

QUERIES_TOPIC = "saved-searches"
MATCHES_TOPIC = "saved-search-matches"
MAX_NAME = 100


class UnknownSavedSearch(TidelogError):
    code = "unknown_saved_search"

    def __init__(self, qid: str):
        super().__init__(f"no saved search {qid!r}")
        self.qid = qid


class InvalidSavedSearch(TidelogError):
    """A saved search that cannot be kept as given; `field` names the part that is wrong."""

    code = "invalid_saved_search"

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SavedSearch:
    id: str
    name: str
    topic: str
    query: str
    created_ms: int

    def to_json(self) -> dict:
        return {
            "query": self.query,
            "name": self.name,
            "topic": self.topic,
            "created_ms": self.created_ms,
        }


@dataclass(frozen=True)
class Validation:
    """How a valid query was read (``explain``) and what the index files it under (None: it
    is checked against every event)."""

    explained: str
    indexed_on: list[str] | None


def validate(query: str) -> Validation:
    """``QueryError`` (with its position) for a bad query, else how it was read."""
    node = parse(query)
    keys = index_keys(node)
    indexed = None
    if keys is not None:
        indexed = sorted((f"{f}:*" if w is None else f"{f}:{w}" if f else w) for f, w in keys)
    return Validation(explain(node), indexed)


class SavedSearches:
    def __init__(
        self,
        store: LogStore,
        coordinator=None,
        *,
        queries_topic: str = QUERIES_TOPIC,
        matches_topic: str = MATCHES_TOPIC,
        poll_s: float = 0.2,
    ):
        self.store, self.coordinator = store, coordinator
        self.queries_topic, self.matches_topic = queries_topic, matches_topic
        self.poll_s = poll_s
        self.runners: dict[str, Runner] = {}
        self.errors: dict[str, str] = {}  # topic -> why its job stopped
        self._subscribers: list[Callable[[list[dict]], None]] = []
        self._lock = threading.Lock()
        self._tail: dict[int, int] = {}  # matches partition -> next offset to announce
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ records

    def _ensure_topics(self) -> None:
        have = set(self.store.list_topics())
        for topic, config in (
            (self.queries_topic, {"cleanup.policy": "compact"}),
            (self.matches_topic, None),
        ):
            if topic not in have:
                try:
                    self.store.create_topic(topic, 1, config)
                except TidelogError:  # created meanwhile by another thread
                    pass

    def save(self, *, name: str, topic: str, query: str, now_ms: int | None = None) -> SavedSearch:
        """Validate and write a new saved search; returns it."""
        name = (name or "").strip()
        if not name or len(name) > MAX_NAME:
            raise InvalidSavedSearch("name", f"a saved search needs a name (1-{MAX_NAME} chars)")
        if topic not in self.store.list_topics(include_internal=False):
            raise InvalidSavedSearch("topic", f"topic {topic!r} does not exist")
        if topic in (self.queries_topic, self.matches_topic):
            raise InvalidSavedSearch("topic", f"{topic!r} holds saved searches themselves")
        validate(query)  # QueryError
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "search"
        saved = SavedSearch(
            f"{slug}-{secrets.token_hex(3)}",
            name,
            topic,
            query,
            int(time.time() * 1000) if now_ms is None else now_ms,
        )
        self._ensure_topics()
        self.store.append(self.queries_topic, JSON.serialize(saved.to_json()), saved.id.encode())
        return saved

    def delete(self, qid: str) -> SavedSearch:
        """Write the tombstone of `qid`; returns what it was (``UnknownSavedSearch``)."""
        saved = self.get(qid)
        self.store.append(self.queries_topic, None, qid.encode())
        return saved

    def list(self) -> list[SavedSearch]:
        """The live saved searches, newest first (read from the queries topic)."""
        latest: dict[str, object] = {}
        try:
            n = self.store.partition_count(self.queries_topic)
        except UnknownTopic:
            return []
        for p in range(n):
            pos, end = self.store.offsets(self.queries_topic, p)
            while pos < end:
                recs = self.store.read(self.queries_topic, p, pos, max_records=1000)
                if not recs:
                    break
                for r in recs:
                    if r.key is not None:
                        latest[r.key.decode("utf-8", "replace")] = r.value
                pos = recs[-1].offset + 1
        out = []
        for qid, raw in latest.items():
            saved = _saved(qid, raw)
            if saved is not None:
                out.append(saved)
        return sorted(out, key=lambda s: (-s.created_ms, s.id))

    def get(self, qid: str) -> SavedSearch:
        for s in self.list():
            if s.id == qid:
                return s
        raise UnknownSavedSearch(qid)

    def recent_matches(self, qid: str, limit: int = 50, scan: int = 5000) -> list[dict]:
        """The newest matches of `qid` (at most `limit`, among the last `scan` records of
        each partition of the matches topic), oldest first."""
        out: list[dict] = []
        key = json.dumps(qid).encode()
        try:
            n = self.store.partition_count(self.matches_topic)
        except UnknownTopic:
            return []
        for p in range(n):
            start, end = self.store.offsets(self.matches_topic, p)
            pos = max(start, end - scan)
            while pos < end:
                recs = self.store.read(self.matches_topic, p, pos, max_records=1000)
                if not recs:
                    break
                out.extend(_match(p, r) for r in recs if r.key == key)
                pos = recs[-1].offset + 1
        out.sort(key=lambda m: (m["ts"], m["partition"], m["offset"]))
        return out[-limit:]

    # ------------------------------------------------------------------ live

    def subscribe(self, callback: Callable[[list[dict]], None]) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def start(self) -> SavedSearches:
        if self._thread is None:
            self._ensure_topics()
            for p in range(self.store.partition_count(self.matches_topic)):
                self._tail[p] = self.store.offsets(self.matches_topic, p)[1]
            self._thread = threading.Thread(
                target=self._loop, name="tidelog-saved-searches", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop the thread and close the runners (commit); idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for runner in self.runners.values():
            try:
                runner.close()
            except TidelogError:
                log.exception("saved searches: closing a runner failed")
        self.runners.clear()

    def status(self) -> dict:
        return {"topics": sorted(self.runners), "errors": dict(self.errors)}

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:  # the loop must survive a broken topic; the error is logged
                log.exception("saved searches: a round failed")
            self._stop.wait(self.poll_s)

    def poll_once(self) -> None:
        """One round: start jobs for newly searched topics, run each, announce new matches."""
        for topic in sorted({s.topic for s in self.list()}):
            if topic not in self.runners and topic not in self.errors:
                self.runners[topic] = self._runner(topic)
        for topic, runner in list(self.runners.items()):
            try:
                runner.poll_once()
            except TidelogError as exc:
                self.errors[topic] = str(exc)
                del self.runners[topic]
                log.warning("saved searches over %s stopped: %s", topic, exc)
        self._announce()

    def _runner(self, topic: str) -> Runner:
        job = Job(f"saved-search-{topic}")
        job.stream(topic, value=_value_serde(topic)).search(
            queries=self.queries_topic, for_topic=topic
        ).to(self.matches_topic)
        return Runner(job, self.store, coordinator=self.coordinator)

    def _announce(self) -> None:
        batch: list[dict] = []
        for p in range(self.store.partition_count(self.matches_topic)):
            pos = self._tail.get(p, 0)
            end = self.store.offsets(self.matches_topic, p)[1]
            while pos < end:
                recs = self.store.read(self.matches_topic, p, pos, max_records=1000)
                if not recs:
                    break
                batch.extend(_match(p, r) for r in recs)
                pos = recs[-1].offset + 1
            self._tail[p] = pos
        if not batch:
            return
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(batch)
            except Exception:
                log.exception("saved searches: a subscriber failed")


def _value_serde(topic: str):
    """The topic's mapped schema when its values are mapped to one (``streams.schemas.
    mapping``); else JSON, unless the registry has a subject for the topic's values
    (``<topic>-value``): then values in its wire format are decoded too (the compiled JSON
    path is for JSON only)."""
    from streams.schemas.mapping import MappedValues, process_mappings
    from streams.schemas.serdes import RegistryOrJson, process_registry

    registry = process_registry()
    book = process_mappings()
    if book is not None and book.get(topic, "value") is not None:
        return MappedValues(book, topic, registry)
    try:
        if registry is not None and f"{topic}-value" in registry.subjects():
            return RegistryOrJson(registry)
    except Exception:  # noqa: BLE001 - an unreachable registry: JSON as before
        log.warning("saved searches over %s: the schema registry cannot be asked", topic)
    return "json"


def _saved(qid: str, raw: bytes | None) -> SavedSearch | None:
    if raw is None:
        return None
    try:
        v = json.loads(raw)
        return SavedSearch(qid, v["name"], v["topic"], v["query"], int(v.get("created_ms", 0)))
    except (ValueError, KeyError, TypeError):
        return None  # a record of another writer: the search job reports it


def _match(partition: int, r) -> dict:
    try:
        v = json.loads(r.value)
    except (TypeError, ValueError):
        v = {}
    return {
        "query": v.get("query"),
        "key": v.get("key"),
        "event": v.get("event"),
        "ts": r.timestamp_ms,
        "partition": partition,
        "offset": r.offset,
    }


__all__ = [
    "InvalidSavedSearch",
    "MATCHES_TOPIC",
    "QUERIES_TOPIC",
    "QueryError",
    "SavedSearch",
    "SavedSearches",
    "UnknownSavedSearch",
    "Validation",
    "validate",
]
