"""Which metric series each live page shows, and the Channels group that carries them.

A *scope* is what one page draws: the overview, one topic, one consumer group, one user panel,
or the stream jobs (records read per second by each job's group, and written per second to each
job's output topics). `route()` says which scopes a series belongs to (so a point is sent to
exactly the pages that draw it) and `matcher()` turns a scope into the filter
`MetricsHub.history` takes for the backfill.

Channels group names allow only ASCII letters, digits, ``-``, ``_`` and ``.`` and fewer than 100
characters, while topic names and group ids are free text, so names are hashed into the group name.

Pure functions and frozen values: thread-safe.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from streams.broker.metrics import parse_series
from streams.log.store import is_internal

KINDS = ("overview", "topic", "group", "panel", "jobs")
OVERVIEW_KINDS = frozenset({"records_in", "bytes_in"})
TOPIC_KINDS = frozenset({"records_in", "bytes_in", "records_out", "bytes_out", "end_offset"})
GROUP_KINDS = frozenset({"group_records", "group_bytes", "group_records_et", "group_lag"})
PRODUCE_KIND = "records_in"  # a group page also draws what is produced to its topics


@dataclass(frozen=True)
class JobTopics:
    """The stream jobs the ``jobs`` scope draws: their names (= their groups' ids) and the
    topics they write."""

    names: frozenset[str] = frozenset()
    outputs: frozenset[str] = frozenset()


NO_JOBS = JobTopics()


@dataclass(frozen=True)
class Scope:
    kind: str  # one of KINDS
    name: str = ""  # topic name, group id or panel id; "" for the overview

    @property
    def group_name(self) -> str:
        """The Channels group of this scope: ``live.<kind>.<hash of name>``."""
        if self.kind in ("overview", "jobs"):
            return f"live.{self.kind}"
        digest = hashlib.blake2b(self.name.encode(), digest_size=12).hexdigest()
        return f"live.{self.kind}.{digest}"


def internal(topic: str) -> bool:
    return is_internal(topic)


def route(
    name: str, readers: Mapping[str, Iterable[str]], jobs: JobTopics = NO_JOBS
) -> list[Scope]:
    """The scopes that draw series `name`; `readers` maps a topic to the groups reading it,
    `jobs` names the stream jobs and their output topics."""
    kind, parts = parse_series(name)
    scopes: list[Scope] = []
    if kind in OVERVIEW_KINDS and len(parts) <= 1 and not (parts and internal(parts[0])):
        scopes.append(Scope("overview"))
    if kind in TOPIC_KINDS and parts:
        scopes.append(Scope("topic", parts[0]))
    if kind == PRODUCE_KIND and len(parts) == 1:
        scopes += [Scope("group", g) for g in readers.get(parts[0], ())]
    if kind in GROUP_KINDS and parts:
        scopes.append(Scope("group", parts[0]))
    if kind == "group_records" and len(parts) == 1 and parts[0] in jobs.names:
        scopes.append(Scope("jobs"))  # a job's records read (its group's commits)
    if kind == "records_in" and len(parts) == 1 and parts[0] in jobs.outputs:
        scopes.append(Scope("jobs"))  # records written to a job's output topic
    return scopes


def learn_readers(names: Iterable[str], readers: dict[str, set[str]]) -> None:
    """Record which groups read which topics, from ``group_lag/<group>/<topic>/<p>`` series."""
    for name in names:
        kind, parts = parse_series(name)
        if kind == "group_lag" and len(parts) == 3:
            readers.setdefault(parts[1], set()).add(parts[0])


def matcher(
    scope: Scope, topics: Iterable[str] = (), jobs: JobTopics = NO_JOBS
) -> Callable[[str], bool]:
    """A filter on series names for `scope`; `topics`: what a group scope's group reads;
    `jobs`: the stream jobs (the jobs scope)."""
    readers = {t: {scope.name} for t in topics} if scope.kind == "group" else {}
    return lambda name: scope in route(name, readers, jobs)
