"""Event sourcing on the log (no Django): commands validated against an aggregate's state
become immutable events on a topic; views are jobs that derive state from it.

- ``store``: ``Command``, ``Event``, ``Decider``, the single-writer ``CommandHandler``
  (optimistic concurrency on the aggregate's version — the design and why in its docstring);
- ``views``: ``SqliteView`` (an idempotent read model kept by a job's ``foreach``),
  ``view_job``, ``catch_up`` (build, rebuild or add a view from the history);
- ``dualwrite``: the dual-write race, two writers updating a database and a search index
  directly beside the same writers going through the log.

The worked example is ``streams.examples.shop``.
"""

from streams.eventsourcing.store import (
    Accepted,
    Command,
    CommandHandler,
    CommandRejected,
    ConcurrencyConflict,
    Decider,
    Event,
    OwnershipError,
)
from streams.eventsourcing.views import SqliteView, ViewGap, catch_up, view_job

__all__ = [
    "Accepted",
    "Command",
    "CommandHandler",
    "CommandRejected",
    "ConcurrencyConflict",
    "Decider",
    "Event",
    "OwnershipError",
    "SqliteView",
    "ViewGap",
    "catch_up",
    "view_job",
]
