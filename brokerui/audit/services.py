"""Writing audit records: to the database and, as JSON, to the internal topic ``__audit`` (of
the built-in broker; on an external cluster, TIDELOG_CLUSTER, to the database only).

Every mutating action of the console, the API, the command line and the Kafka port
(``brokerui.kafkaport.adapters.KafkaAuditSink``) calls ``record`` after it succeeded; a refusal
worth seeing (an offset reset refused because the group has members) is recorded too, with the
action suffixed ``.refused``.
"""

from __future__ import annotations

import json
import logging

from brokerui.audit.models import AuditEntry

log = logging.getLogger(__name__)

AUDIT_TOPIC = "__audit"
AUDIT_TOPIC_CONFIG = {"retention.ms": "-1", "cleanup.policy": "delete"}


def record(
    user, action: str, target: str, *, before=None, after=None, source: str = "console",
    cluster=None, who: str | None = None,
) -> AuditEntry:
    """Persist one audit entry; returns it. `cluster` None: the process's broker (anything
    with a ``store``, or without one for an external cluster). `who`: the author as shown,
    when it is more than the user's name (a Kafka client's id and address)."""
    username = who or getattr(user, "username", "") or "anonymous"
    entry = AuditEntry.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None,
        username=username[: AuditEntry._meta.get_field("username").max_length],
        action=action, target=target, before=before, after=after, source=source,
    )
    _append_to_topic(entry, cluster)
    return entry


def _append_to_topic(entry: AuditEntry, cluster) -> None:
    if cluster is None:
        from brokerui.cluster import get_cluster

        cluster = get_cluster()
    store = getattr(cluster, "store", None)
    if store is None:  # an external cluster: its __* topics are not Tidelog's to write
        return
    if AUDIT_TOPIC not in store.list_topics():
        try:
            store.create_topic(AUDIT_TOPIC, 1, AUDIT_TOPIC_CONFIG)
        except Exception:  # noqa: BLE001 - created meanwhile by another request
            pass
    payload = {
        "id": entry.pk, "at": entry.at.isoformat(), "user": entry.username,
        "action": entry.action, "target": entry.target, "before": entry.before,
        "after": entry.after, "source": entry.source,
    }
    store.append(AUDIT_TOPIC, json.dumps(payload, default=str).encode(),
                 key=entry.target.encode())
