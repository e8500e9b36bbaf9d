"""Audit of admin changes made over the Kafka port: which requests change the broker, what they
changed (before and after, in the console's shape for the same action) and who asked.

The listener does not know where audit records go: it hands an `AuditEvent` to an `AuditSink`
(``ListenerConfig.audit``), the seam the web console implements over its audit log
(``brokerui.kafkaport.adapters.KafkaAuditSink``), so Kafka clients' changes land on the same
Audit log page and in the same ``__audit`` topic as the console's. Without a sink nothing is
recorded.

Audited, with the console's action names and payloads:

========================  ======================  =================================================
Kafka API                 action                  before / after
========================  ======================  =================================================
CreateTopics              topic.create            - / partitions, config (overrides)
DeleteTopics              topic.delete            partitions, records, size_bytes, config,
                                                  end_offsets / -
AlterConfigs,             topic.config            overrides / overrides
IncrementalAlterConfigs
CreatePartitions          topic.add_partitions    partitions / partitions
DeleteRecords             topic.purge             log_start_offsets / log_start_offsets,
                                                  records_deleted, request
DeleteGroups              group.delete            offsets / - (``group.delete.refused`` with the
                                                  reason while the group has members)
OffsetCommit outside a    group.reset             offsets / strategy, offsets
group generation (admin
clients, generation -1)
OffsetDelete              group.offsets.delete    topic, offsets / topic, offsets None
CreateAcls                acl.create              - / the binding (one record per ACL created)
DeleteAcls                acl.delete              the binding / - (one per ACL deleted)
(a request an ACL         acl.denied              - / operation, api (once per connection and
refuses)                                          resource; recorded by the server)
========================  ======================  =================================================

``validate_only`` requests change nothing and are not recorded; an OffsetCommit that changes no
offset (a standalone consumer committing where it already was) is not either.

Thread-safety: `capture_before` and `events_after` are blocking (they read the store and the
coordinator) and run on the listener's thread pool, like `AuditSink.record`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from streams.errors import TidelogError
from streams.protocol.codec import Request
from streams.protocol.handlers.common import topic_for_id
from streams.protocol.handlers.offsets import MIN_COMMIT_TOPIC_ID_VERSION

OFFSET_COMMIT, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 8, 19, 20, 21
ALTER_CONFIGS, CREATE_PARTITIONS, DELETE_GROUPS = 33, 37, 42
INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE = 44, 47
CREATE_ACLS, DELETE_ACLS = 30, 31
TOPIC_RESOURCE = 2
NON_EMPTY_GROUP = 68
RESET_STRATEGY = "offsets committed by a Kafka client outside a group generation"


@dataclasses.dataclass(frozen=True)
class AuditEvent:
    action: str  # the console's action name, e.g. topic.create
    target: str  # "topic NAME" or "group ID", as the console writes them
    before: Any
    after: Any
    client_id: str  # the Kafka client's client.id ("" when it sent none)
    address: str  # the client's host:port
    user: str | None = None  # the SASL user; None on a listener without authentication

    @property
    def who(self) -> str:
        """How the audit log names the author: ``client-id@host:port``, after the user when
        the connection authenticated."""
        client = f"{self.client_id or '(no client id)'}@{self.address}"
        return f"{self.user} ({client})" if self.user else client


class AuditSink(Protocol):
    """Where the listener's audit events go. `record` is blocking (called on the listener's
    thread pool, after the change succeeded and before the client gets its answer); an
    exception is logged and the client still gets its answer (the change is made)."""

    def record(self, event: AuditEvent) -> None: ...


# (action, target, before, after)
Change = tuple[str, str, Any, Any]


@dataclasses.dataclass(frozen=True)
class _Audited:
    before: Callable[[Any, Request], Any]  # (ctx, req) -> state, before the handler runs
    after: Callable[[Any, Request, Any, Any], list[Change]]  # (ctx, req, response, state)


def is_audited(req: Request) -> bool:
    """Whether `req` may change something worth an audit record."""
    if req.api_key == OFFSET_COMMIT:
        return _admin_commit(req)
    if req.api_key in AUDITED:
        return not getattr(req.body, "validate_only", False)
    return False


def capture_before(ctx, req: Request) -> Any:
    """What the request's audit records need from before it runs (blocking)."""
    return AUDITED[req.api_key].before(ctx, req)


def changes_after(ctx, req: Request, response: Any, state: Any) -> list[Change]:
    """The changes `response` reports as made, with their before and after (blocking)."""
    return AUDITED[req.api_key].after(ctx, req, response, state)


# ---------------------------------------------------------------------- topics


def _describe(ctx, name: str | None):
    if name is None:
        return None
    try:
        return ctx.store.describe_topic(name)
    except TidelogError:
        return None


def _nothing(ctx, req: Request) -> None:
    return None


def _created(ctx, req: Request, response, state) -> list[Change]:
    out = []
    for r in response.topics:
        d = _describe(ctx, r.name) if r.error_code == 0 else None
        if d is not None:
            after = {"partitions": len(d.partitions), "config": dict(d.overrides)}
            out.append(("topic.create", f"topic {r.name}", None, after))
    return out


def _deletable(ctx, req: Request) -> dict[str, dict]:
    b = req.body
    if req.api_version >= 6:
        names = [t.name or _name_for_id(ctx, t.topic_id) for t in b.topics]
    else:
        names = list(b.topic_names)
    state = {}
    for name in names:
        d = _describe(ctx, name)
        if d is not None:
            state[name] = {
                "partitions": len(d.partitions),
                "records": d.record_count,
                "size_bytes": d.size_bytes,
                "config": dict(d.overrides),
                "end_offsets": {str(p.partition): p.end_offset for p in d.partitions},
            }
    return state


def _name_for_id(ctx, topic_id) -> str | None:
    try:
        return topic_for_id(ctx, topic_id)
    except TidelogError:
        return None


def _commit_topic(ctx, req: Request, t) -> str | None:
    """The name of an OffsetCommit topic: v10 names topics by id (KIP-516)."""
    if req.api_version < MIN_COMMIT_TOPIC_ID_VERSION:
        return t.name
    return _name_for_id(ctx, t.topic_id)


def _deleted(ctx, req: Request, response, state) -> list[Change]:
    return [
        ("topic.delete", f"topic {r.name}", state[r.name], None)
        for r in response.responses
        if r.error_code == 0 and r.name in state
    ]


def _overrides(ctx, req: Request) -> dict[str, dict]:
    state = {}
    for r in req.body.resources:
        d = _describe(ctx, r.resource_name) if r.resource_type == TOPIC_RESOURCE else None
        if d is not None:
            state[r.resource_name] = dict(d.overrides)
    return state


def _configured(ctx, req: Request, response, state) -> list[Change]:
    out = []
    for r in response.responses:
        if r.error_code or r.resource_name not in state:
            continue
        d = _describe(ctx, r.resource_name)
        if d is not None and dict(d.overrides) != state[r.resource_name]:
            target = f"topic {r.resource_name}"
            out.append(("topic.config", target, state[r.resource_name], dict(d.overrides)))
    return out


def _partition_counts(ctx, req: Request) -> dict[str, int]:
    state = {}
    for t in req.body.topics:
        d = _describe(ctx, t.name)
        if d is not None:
            state[t.name] = len(d.partitions)
    return state


def _partitioned(ctx, req: Request, response, state) -> list[Change]:
    out = []
    for r in response.results:
        d = _describe(ctx, r.name) if r.error_code == 0 and r.name in state else None
        if d is not None:
            before, after = {"partitions": state[r.name]}, {"partitions": len(d.partitions)}
            out.append(("topic.add_partitions", f"topic {r.name}", before, after))
    return out


def _log_starts(ctx, req: Request) -> dict[tuple[str, int], int]:
    state = {}
    for t in req.body.topics:
        d = _describe(ctx, t.name)
        if d is None:
            continue
        starts = {p.partition: p.log_start_offset for p in d.partitions}
        for p in t.partitions:
            if p.partition_index in starts:
                state[(t.name, p.partition_index)] = starts[p.partition_index]
    return state


def _purged(ctx, req: Request, response, state) -> list[Change]:
    """One record per topic and requested offset (Kafka's -1, the high watermark: mode all)."""
    asked = {(t.name, p.partition_index): p.offset for t in req.body.topics for p in t.partitions}
    done: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
    for t in response.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if p.error_code == 0 and key in state and key in asked:
                done.setdefault((t.name, asked[key]), {})[p.partition_index] = (
                    state[key],
                    p.low_watermark,
                )
    out = []
    for (topic, offset), parts in done.items():
        d = _describe(ctx, topic)
        every = d is not None and len(parts) == len(d.partitions)
        request: dict[str, Any] = {
            "partition": "all"
            if every
            else (next(iter(parts)) if len(parts) == 1 else sorted(parts)),
            "mode": "all" if offset < 0 else "offset",
        }
        if offset >= 0:
            request["before_offset"] = offset
        before = {"log_start_offsets": {str(p): b for p, (b, _) in sorted(parts.items())}}
        after = {
            "log_start_offsets": {str(p): a for p, (_, a) in sorted(parts.items())},
            "records_deleted": sum(max(a - b, 0) for b, a in parts.values()),
            "request": request,
        }
        out.append(("topic.purge", f"topic {topic}", before, after))
    return out


# ---------------------------------------------------------------------- groups


def _offsets_json(committed: dict) -> dict[str, dict[str, int]]:
    """{topic: {"partition": offset}}, the console's shape for a group's offsets."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), c in sorted(committed.items()):
        out.setdefault(topic, {})[str(partition)] = getattr(c, "offset", c)
    return out


def _group_offsets(ctx, req: Request) -> dict[str, dict]:
    return {g: _offsets_json(ctx.coordinator.committed(g)) for g in req.body.groups_names}


def _groups_deleted(ctx, req: Request, response, state) -> list[Change]:
    out = []
    for r in response.results:
        target = f"group {r.group_id}"
        before = {"offsets": state.get(r.group_id, {})}
        if r.error_code == 0:
            out.append(("group.delete", target, before, None))
        elif r.error_code == NON_EMPTY_GROUP:
            reason = f"group {r.group_id} has active members (Kafka error NON_EMPTY_GROUP)"
            out.append(("group.delete.refused", target, before, {"reason": reason}))
    return out


def _admin_commit(req: Request) -> bool:
    """An OffsetCommit from outside a group generation: an admin client setting offsets (a
    reset), or a consumer using assign() without group membership."""
    generation = req.body.generation_id_or_member_epoch if req.api_version >= 1 else -1
    return generation < 0 and not req.body.member_id


def _commit_before(ctx, req: Request) -> dict[tuple[str, int], int | None]:
    committed = ctx.coordinator.committed(req.body.group_id)
    out = {}
    for t in req.body.topics:
        name = _commit_topic(ctx, req, t)
        for p in t.partitions:
            out[(name, p.partition_index)] = getattr(
                committed.get((name, p.partition_index)), "offset", None
            )
    return out


def _committed(ctx, req: Request, response, state) -> list[Change]:
    ok = {
        (_commit_topic(ctx, req, t), p.partition_index)
        for t in response.topics
        for p in t.partitions
        if p.error_code == 0
    }
    asked = {
        (_commit_topic(ctx, req, t), p.partition_index): p.committed_offset
        for t in req.body.topics
        for p in t.partitions
    }
    changed = {k: v for k, v in asked.items() if k in ok and state.get(k) != v}
    if not changed:
        return []
    before: dict[str, dict[str, int | None]] = {}
    after: dict[str, dict[str, int | None]] = {}
    for (topic, partition), offset in sorted(changed.items()):
        before.setdefault(topic, {})[str(partition)] = state.get((topic, partition))
        after.setdefault(topic, {})[str(partition)] = offset
    return [
        (
            "group.reset",
            f"group {req.body.group_id}",
            {"offsets": before},
            {"strategy": RESET_STRATEGY, "offsets": after},
        )
    ]


def _offsets_of_topics(ctx, req: Request) -> dict[str, dict]:
    committed = ctx.coordinator.committed(req.body.group_id)
    return {
        t.name: _offsets_json({k: v for k, v in committed.items() if k[0] == t.name})
        for t in req.body.topics
    }


def _offsets_deleted(ctx, req: Request, response, state) -> list[Change]:
    if response.error_code:
        return []
    out = []
    for t in response.topics:
        if any(p.error_code for p in t.partitions) or not state.get(t.name):
            continue
        before = {"topic": t.name, "offsets": state[t.name]}
        after = {"topic": t.name, "offsets": None}
        out.append(("group.offsets.delete", f"group {req.body.group_id}", before, after))
    return out


# ---------------------------------------------------------------------- ACLs


def _acls_created(ctx, req: Request, response, state) -> list[Change]:
    from streams.acl.model import AclBinding, Operation, PatternType, Permission, ResourceType

    out = []
    for c, result in zip(req.body.creations, response.results, strict=True):
        if result.error_code:
            continue
        pattern = c.resource_pattern_type if req.api_version >= 1 else PatternType.LITERAL
        b = AclBinding(
            ResourceType(c.resource_type), c.resource_name, PatternType(pattern), c.principal,
            c.host, Operation(c.operation), Permission(c.permission_type),
        )  # fmt: skip
        out.append(("acl.create", _acl_target(b.resource_type, b.name), None, b.to_json()))
    return out


def _acls_deleted(ctx, req: Request, response, state) -> list[Change]:
    from streams.acl.model import AclBinding, Operation, PatternType, Permission, ResourceType

    out = []
    for result in response.filter_results:
        for m in result.matching_acls:
            b = AclBinding(
                ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type),
                m.principal, m.host, Operation(m.operation), Permission(m.permission_type),
            )  # fmt: skip
            out.append(("acl.delete", _acl_target(b.resource_type, b.name), b.to_json(), None))
    return out


def _acl_target(resource_type, name: str) -> str:
    return f"acl {resource_type.name.lower().replace('_', ' ')} {name}"


AUDITED: dict[int, _Audited] = {
    OFFSET_COMMIT: _Audited(_commit_before, _committed),
    CREATE_TOPICS: _Audited(_nothing, _created),
    DELETE_TOPICS: _Audited(_deletable, _deleted),
    DELETE_RECORDS: _Audited(_log_starts, _purged),
    ALTER_CONFIGS: _Audited(_overrides, _configured),
    INCREMENTAL_ALTER_CONFIGS: _Audited(_overrides, _configured),
    CREATE_PARTITIONS: _Audited(_partition_counts, _partitioned),
    DELETE_GROUPS: _Audited(_group_offsets, _groups_deleted),
    OFFSET_DELETE: _Audited(_offsets_of_topics, _offsets_deleted),
    CREATE_ACLS: _Audited(_nothing, _acls_created),
    DELETE_ACLS: _Audited(_nothing, _acls_deleted),
}
