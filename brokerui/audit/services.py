"""Writing audit records: to the database and, as JSON, to the internal topic ``__audit`` (of
the built-in broker; on an external cluster, TIDELOG_CLUSTER, to the database only).

Every mutating action of the console, the API, the command line and the Kafka port
(``brokerui.kafkaport.adapters.KafkaAuditSink``) is recorded after it succeeded; a refusal
worth seeing (an offset reset refused because the group has members) is recorded too, with the
action suffixed ``.refused``.

Where records go is explicit: an `AuditSink` (the Protocol services take). `AuditLog` is the
one implementation, over the database and the ``__audit`` topic of the `LogStore` it is given
(None: the database only). `process_sink()` wires the process's own: the built-in broker's
store, or none on an external cluster; only the edges (views, signal receivers) call it, and
pass what it returns to the services. `record(...)` writes through the `sink` it is given.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import logging
from typing import Any, Protocol

from brokerui.audit.models import AuditEntry

log = logging.getLogger(__name__)

AUDIT_TOPIC = "__audit"
AUDIT_TOPIC_CONFIG = {"retention.ms": "-1", "cleanup.policy": "delete"}


@dataclasses.dataclass(frozen=True)
class Actor:
    """Who makes a change, as the audit log names it: the Django user (None from the command
    line), the source (console, api, cli, kafka) and, when it is more than the user's name,
    the author as shown."""

    user: Any = None
    source: str = "console"
    who: str | None = None

    @classmethod
    def cli(cls) -> Actor:
        """The operating-system user running a management command."""
        return cls(None, "cli", f"cli:{getpass.getuser()}")

    def record(self, sink: AuditSink, action: str, target: str, *, before=None, after=None):
        return sink.record(
            self.user, action, target, before=before, after=after, source=self.source, who=self.who
        )


class AuditTopicStore(Protocol):
    """What `AuditLog` needs of a log store to append to ``__audit``."""

    def list_topics(self) -> list[str]: ...

    def create_topic(self, name: str, partitions: int, config: dict) -> Any: ...

    def append(self, topic: str, value: bytes, *, key: bytes | None = None) -> Any: ...


class AuditSink(Protocol):
    """Where services write their audit records. `record` is blocking; it returns the entry."""

    def record(
        self,
        user,
        action: str,
        target: str,
        *,
        before=None,
        after=None,
        source: str = "console",
        who: str | None = None,
    ) -> AuditEntry: ...


class AuditLog:
    """The audit log: one `AuditEntry` row per record and, when `store` is given, the same
    record as JSON appended to its ``__audit`` topic (created on first use)."""

    def __init__(self, store: AuditTopicStore | None = None, cluster: str | None = None):
        self.store = store
        self.cluster = cluster  # None: the current cluster (brokerui.cluster.current)

    def record(
        self,
        user,
        action: str,
        target: str,
        *,
        before=None,
        after=None,
        source: str = "console",
        who: str | None = None,
    ) -> AuditEntry:
        """Persist one audit entry; returns it. `who`: the author as shown, when it is more
        than the user's name (a Kafka client's id and address)."""
        from brokerui.cluster import current

        username = who or getattr(user, "username", "") or "anonymous"
        entry = AuditEntry.objects.create(
            cluster=self.cluster or current().name,
            user=user if getattr(user, "is_authenticated", False) else None,
            username=username[: AuditEntry._meta.get_field("username").max_length],
            action=action,
            target=target,
            before=before,
            after=after,
            source=source,
        )
        if self.store is not None:
            self._append_to_topic(entry)
        return entry

    def _append_to_topic(self, entry: AuditEntry) -> None:
        store = self.store
        if AUDIT_TOPIC not in store.list_topics():
            try:
                store.create_topic(AUDIT_TOPIC, 1, AUDIT_TOPIC_CONFIG)
            except Exception:  # noqa: BLE001 - created meanwhile by another request
                pass
        payload = {
            "id": entry.pk,
            "at": entry.at.isoformat(),
            "user": entry.username,
            "action": entry.action,
            "target": entry.target,
            "before": entry.before,
            "after": entry.after,
            "source": entry.source,
            "cluster": entry.cluster,
        }
        store.append(
            AUDIT_TOPIC, json.dumps(payload, default=str).encode(), key=entry.target.encode()
        )


def process_sink() -> AuditSink:
    """The process's audit sink: the built-in broker's ``__audit`` topic and the database, or
    the database only on an external cluster (its ``__*`` topics are not Tidelog's to write)."""
    from brokerui.cluster import is_external

    if is_external():
        return AuditLog(None)
    from brokerui.broker import get_broker

    return AuditLog(get_broker().store)


def record(
    user,
    action: str,
    target: str,
    *,
    before=None,
    after=None,
    source: str = "console",
    who: str | None = None,
    sink: AuditSink,
) -> AuditEntry:
    """Persist one audit entry through `sink`; returns it."""
    return sink.record(user, action, target, before=before, after=after, source=source, who=who)
