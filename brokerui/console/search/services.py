"""Saved searches: the process's `SavedSearches`, create and delete (each audited), the reads
the pages need. Searches run in this process over the built-in broker's store
(`streams.jobs.saved`); on an external cluster there is none (`saved_searches_source` is None).

====================  =====================================  ==================================
action                before                                 after
====================  =====================================  ==================================
saved_search.create   None                                   the saved search
saved_search.delete   the saved search                       None
====================  =====================================  ==================================

Thread-safety: `saved_searches_source` is locked; the rest is as `SavedSearches`.
"""

from __future__ import annotations

import atexit
import json
import threading
from typing import Protocol

from brokerui.audit.services import Actor, AuditSink
from streams.jobs.saved import SavedSearch, Validation, validate


class SavedSearchBackend(Protocol):
    """What the pages need of `streams.jobs.saved.SavedSearches`."""

    def save(self, *, name: str, topic: str, query: str) -> SavedSearch: ...

    def delete(self, qid: str) -> SavedSearch: ...

    def list(self) -> list[SavedSearch]: ...

    def get(self, qid: str) -> SavedSearch: ...

    def recent_matches(self, qid: str, limit: int = 50) -> list[dict]: ...

    def status(self) -> dict: ...


_lock = threading.Lock()
_running: list[tuple[object, object]] = []  # (broker, its SavedSearches); one at a time


def saved_searches_source() -> SavedSearchBackend | None:
    """The saved searches over the built-in broker, started on first use and closed at exit;
    None on an external cluster (TIDELOG_CLUSTER)."""
    from brokerui.broker import get_broker
    from brokerui.cluster import is_external
    from streams.jobs.saved import SavedSearches

    if is_external():
        return None
    broker = get_broker()
    with _lock:
        if _running and _running[0][0] is broker:
            return _running[0][1]
        close_saved_searches()  # a broker closed and reopened (tests): stop the old thread
        running = SavedSearches(broker.store, broker.coordinator).start()
        _running.append((broker, running))
        # registered after the broker's own (get_broker above), so it runs before it (LIFO)
        atexit.register(running.close)
        return running


def close_saved_searches() -> None:
    """Stop the saved searches' thread and runners (at exit: before the broker closes)."""
    while _running:
        _, running = _running.pop()
        running.close()


def search_validate(*, query: str) -> Validation:
    """How `query` is read (``QueryError`` with the position when it cannot be)."""
    return validate(query)


def _target(s: SavedSearch) -> str:
    return f"saved search {s.name} ({s.id})"


def saved_search_create(
    *,
    searches: SavedSearchBackend,
    sink: AuditSink,
    actor: Actor,
    name: str,
    topic: str,
    query: str,
) -> SavedSearch:
    """Validate and save; InvalidSavedSearch / QueryError when bad (nothing written)."""
    saved = searches.save(name=name, topic=topic, query=query)
    actor.record(sink, "saved_search.create", _target(saved), after=saved.to_json())
    return saved


def saved_search_delete(
    *, searches: SavedSearchBackend, sink: AuditSink, actor: Actor, qid: str
) -> SavedSearch:
    saved = searches.delete(qid)  # UnknownSavedSearch
    actor.record(sink, "saved_search.delete", _target(saved), before=saved.to_json())
    return saved


def masked(rows: list[dict], masker) -> list[dict]:
    """Match rows (`match_row`'s) with the fields `masker` hides masked (None: as they are)."""
    if not masker:
        return rows
    return [match_row({**m, "event": masker.event(m["event"])}) for m in rows]


def match_row(m: dict) -> dict:
    """A match as a page and the live socket show it: the event as compact JSON."""
    event = json.dumps(m["event"], separators=(",", ":"), ensure_ascii=False)
    return {**m, "event_json": event[:2000]}


def saved_searches_read(*, searches: SavedSearchBackend | None) -> dict:
    """The list page: the saved searches and which searched topics' jobs stopped (why)."""
    if searches is None:
        return {"available": False, "searches": [], "errors": {}}
    status = searches.status()
    return {"available": True, "searches": searches.list(), "errors": status["errors"]}


def saved_search_read(*, searches: SavedSearchBackend, qid: str, masker_for=None) -> dict:
    """One search's page: the search, its newest matches (masked by `masker_for(topic)`'s
    masker), its topic's job error if any."""
    saved = searches.get(qid)  # UnknownSavedSearch
    masker = masker_for(saved.topic) if masker_for is not None else None
    return {
        "search": saved,
        "validation": validate(saved.query),
        "matches": masked([match_row(m) for m in searches.recent_matches(qid)], masker),
        "error": searches.status()["errors"].get(saved.topic),
    }


def saved_search_matches(*, searches: SavedSearchBackend, qid: str) -> list[dict]:
    """The newest matches of `qid` as rows (the live page's snapshot), oldest first."""
    return [match_row(m) for m in searches.recent_matches(qid)]
