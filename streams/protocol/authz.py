"""Authorisation on the Kafka port: which `Role` each request needs, and Kafka's answer to a
principal that lacks it.

Roles are the console's (see ``security.Role``): a *viewer* reads (Fetch, ListOffsets,
Metadata, configs, groups), joins groups and commits offsets as a group member; an *operator*
also produces, creates, deletes and alters topics and configs, adds partitions, deletes
records and groups, deletes committed offsets, and commits offsets from outside a group
generation (what admin clients do to reset a group). A principal with neither role is refused
everything but ApiVersions and the SASL exchange.

A refused request is answered as Kafka answers a request its ACLs deny: the same response with
TOPIC_AUTHORIZATION_FAILED on every topic or partition, GROUP_AUTHORIZATION_FAILED on every
group, CLUSTER_AUTHORIZATION_FAILED for cluster-wide operations (InitProducerId of an
idempotent producer, broker configs); a Metadata request lists no topics (named ones answer
TOPIC_AUTHORIZATION_FAILED) and ListGroups lists no groups. An acks=0 Produce has no response
to carry the error: its connection is closed, as Kafka does. A principal whose roles differ by
scope (``Principal.grants``: operator of the topics ``team-a.*``, viewer elsewhere) needs the
request's role on every topic and group it names; a request is allowed or refused whole, so
nothing reaches a handler half-allowed.

On a listener with SASL, Kafka's ACLs (``streams.acl``, kept in ``__acls``) refine the roles per
resource. Each request names resources with the operation Kafka's authorizer checks for it
(`resources`: Produce WRITE on each topic, Fetch READ, OffsetCommit READ on the group and the
topics, CreateTopics CREATE, InitProducerId WRITE on the transactional id or IDEMPOTENT_WRITE on
the cluster, CreateAcls ALTER on the cluster, ...). For each, in Kafka's order: a super user
(``ListenerConfig.super_users``) is allowed; a matching DENY refuses, whatever the role; a
matching ALLOW allows, whatever the role; with no binding for it the role decides. A request
passes when every resource it names is allowed, and is refused whole otherwise (Kafka answers
such a request partly; here, too, nothing reaches a handler half-allowed). A Metadata request
for all topics and ListGroups list only what the principal may DESCRIBE (`visible`).
Refusals by an ACL are logged and audited (``acl.denied``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

from streams.acl.model import CLUSTER_NAME, Operation, ResourceType
from streams.errors import UnknownTopicId
from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import NODE_ID, CloseConnection, ErrorCode, topic_for_id
from streams.protocol.security import Principal, Role

TOPIC = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
BROKER_RESOURCE = 4
TRANSACTION_KEY_TYPE = 1

# API key -> the role it needs; OffsetCommit depends on the request (see `required_role`)
OPERATOR_APIS = {0, 19, 20, 21, 22, 24, 25, 26, 28, 30, 31, 33, 37, 42, 44, 47}
ANYONE_APIS = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate
OFFSET_COMMIT = 8
LISTINGS = {3, 16}  # Metadata and ListGroups: their answers are filtered (`filter_listing`)


def required_role(req: Request) -> Role:
    if req.api_key in ANYONE_APIS:
        return Role.NONE
    if req.api_key in OPERATOR_APIS:
        return Role.OPERATOR
    if req.api_key == OFFSET_COMMIT:
        generation = req.body.generation_id_or_member_epoch if req.api_version >= 1 else -1
        member = generation >= 0 and bool(req.body.member_id)
        return Role.VIEWER if member else Role.OPERATOR
    return Role.VIEWER


Resource = tuple[ResourceType, str, Operation]
T, G, C, X = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
R, W, D = Operation.READ, Operation.WRITE, Operation.DESCRIBE
CONFIG_TYPES = {2: T, 4: C}  # DescribeConfigs' resource types: topic, broker


class Refusal(NamedTuple):
    answer: Callable[[], Any]  # Kafka's refusal: a response body, or raises CloseConnection
    reason: str  # for the log: "role viewer, needs operator" or "ACL: WRITE on TOPIC orders"
    denied: Resource | None  # the resource an ACL denied (None: the role did not suffice)


def _name(ctx, name: str | None, topic_id) -> str:
    if name:
        return name
    try:
        return topic_for_id(ctx, topic_id)
    except UnknownTopicId:
        return ""  # the handler answers UNKNOWN_TOPIC_ID


def resources(ctx, req: Request) -> list[Resource]:
    """What `req` acts on, with the operation Kafka authorises for each."""
    b, k, v = req.body, req.api_key, req.api_version
    if k == 0:
        out = [(T, _name(ctx, t.name, t.topic_id), W) for t in b.topic_data]
        return out + ([(X, b.transactional_id, W)] if b.transactional_id else [])
    if k == 1:
        return [(T, _name(ctx, t.topic, getattr(t, "topic_id", None)), R) for t in b.topics]
    if k in (2, 23):
        return [(T, getattr(t, "name", None) or t.topic, D) for t in b.topics]
    if k == 3:  # all topics (None, or [] in v0) are filtered afterwards (`visible`)
        named = b.topics is not None and not (v == 0 and not b.topics)
        return [(T, _name(ctx, t.name, getattr(t, "topic_id", None)), D)
                for t in (b.topics if named else ())]  # fmt: skip
    if k == 8:
        topics = [(T, _name(ctx, t.name, getattr(t, "topic_id", None)), R) for t in b.topics]
        return [(G, b.group_id, R), *topics]
    if k == 9:
        if v < 8:
            return [(G, b.group_id, D)] + [(T, t.name, D) for t in (b.topics or ())]
        out = []
        for g in b.groups:
            out.append((G, g.group_id, D))
            out += [(T, _name(ctx, getattr(t, "name", None), getattr(t, "topic_id", None)), D)
                    for t in (g.topics or ())]  # fmt: skip
        return out
    if k == 10:
        kind = X if (v >= 1 and b.key_type == 1) else G
        keys = b.coordinator_keys if v >= 4 else [b.key]
        return [(kind, key, D) for key in keys]
    if k in (11, 12, 13, 14):
        return [(G, b.group_id, R)]
    if k == 15:
        return [(G, g, D) for g in b.groups]
    if k == 19:
        return [(T, t.name, Operation.CREATE) for t in b.topics]
    if k == 20:
        if v >= 6:
            return [(T, _name(ctx, t.name, t.topic_id), Operation.DELETE) for t in b.topics]
        return [(T, name, Operation.DELETE) for name in b.topic_names]
    if k == 21:
        return [(T, t.name, Operation.DELETE) for t in b.topics]
    if k == 22:
        if b.transactional_id:
            return [(X, b.transactional_id, W)]
        return [(C, CLUSTER_NAME, Operation.IDEMPOTENT_WRITE)]
    if k == 24:
        topics = [(T, t.name, W) for t in b.v3_and_below_topics]
        return [(X, b.v3_and_below_transactional_id, W), *topics]
    if k == 25:
        return [(X, b.transactional_id, W), (G, b.group_id, R)]
    if k == 26:
        return [(X, b.transactional_id, W)]
    if k == 28:
        topics = [(T, t.name, R) for t in b.topics]
        return [(X, b.transactional_id, W), (G, b.group_id, R), *topics]
    if k in (32, 33, 44):
        op = Operation.DESCRIBE_CONFIGS if k == 32 else Operation.ALTER_CONFIGS
        return [
            (CONFIG_TYPES[r.resource_type], r.resource_name if r.resource_type == 2 else
             CLUSTER_NAME, op)
            for r in b.resources
            if r.resource_type in CONFIG_TYPES
        ]  # fmt: skip
    if k == 37:
        return [(T, t.name, Operation.ALTER) for t in b.topics]
    if k == 42:
        return [(G, g, Operation.DELETE) for g in b.groups_names]
    if k == 47:
        return [(G, b.group_id, Operation.DELETE)] + [(T, t.name, R) for t in b.topics]
    if k in (29, 60, 61, 65, 66):  # DescribeAcls, DescribeCluster, the transactions' views
        return [(C, CLUSTER_NAME, D)]
    if k in (30, 31):  # CreateAcls, DeleteAcls
        return [(C, CLUSTER_NAME, Operation.ALTER)]
    return []


def kafka_principal(principal: Principal) -> str:
    return f"User:{principal.user}"


def _role_on(principal: Principal, resource: Resource) -> Role:
    """`principal`'s role for one resource: per topic and group where its grants differ by
    scope; Kafka's IDEMPOTENT_WRITE on the cluster follows WRITE on any topic (KIP-679)."""
    grants = principal.grants
    rtype, name, op = resource
    if grants is None:
        return principal.role
    if rtype is T or rtype is G:
        return grants.role_on(rtype.name.lower(), name)
    if op is Operation.IDEMPOTENT_WRITE:
        return grants.highest()
    return principal.role


def _role_allows(principal: Principal, required: Role, named: list[Resource]) -> bool:
    if principal.grants is None:
        return principal.role >= required
    if not named:  # a listing (filtered afterwards) or an API about nothing in particular
        return principal.grants.highest() >= required
    return all(_role_on(principal, r) >= required for r in named)


def refusal(ctx, req: Request, principal: Principal) -> Refusal | None:
    """None when `principal` may make `req`; otherwise Kafka's refusal and why."""
    required = required_role(req)
    acls = ctx.acls
    who = kafka_principal(principal)
    named = resources(ctx, req) if principal.grants is not None or acls is not None else []
    if acls is not None and principal.user is not None and not acls.empty_for(who):
        if who in acls.super_users:
            return None
        for resource in named:
            rtype, name, op = resource
            decided = acls.decide(who, req.client_host, op, rtype, name)
            if decided is False:
                why = f"an ACL denies {op.name} on {rtype.name} {name}"
                return Refusal(_answer(ctx, req), why, resource)
            if decided is None and _role_on(principal, resource) < required:
                role = _role_on(principal, resource).name.lower()
                why = f"no ACL allows {op.name} on {rtype.name} {name}, nor does the role {role}"
                return Refusal(_answer(ctx, req), why, None)
        if named:  # each allowed, by an ACL or by the role
            return None
    if _role_allows(principal, required, named):
        return None
    needs = required.name.lower()
    lacking = [r for r in named if _role_on(principal, r) < required]
    if lacking:
        rtype, name, _ = lacking[0]
        role = _role_on(principal, lacking[0]).name.lower()
        why = f"role {role} on {rtype.name} {name}, needs {needs}"
    else:
        why = f"role {principal.role.name.lower()}, needs {needs}"
    return Refusal(_answer(ctx, req), why, None)


def may_create_topic(ctx, principal: Principal, host: str, name: str) -> bool:
    """Whether a Metadata request of `principal` may auto-create topic `name` (Kafka: CREATE on
    the topic): by the ACLs, else by the role on it."""
    acls, who = ctx.acls, kafka_principal(principal)
    if acls is not None and principal.user is not None and not acls.empty_for(who):
        if who in acls.super_users:
            return True
        decided = acls.decide(who, host, Operation.CREATE, T, name)
        if decided is not None:
            return decided
    return _role_on(principal, (T, name, Operation.CREATE)) >= Role.OPERATOR


def visible(
    ctx, principal: Principal, host: str, rtype: ResourceType, names: list[str]
) -> list[str]:
    """Of `names`, those `principal` may DESCRIBE (what a Metadata request for all topics and
    ListGroups list): by the ACLs, else by the role on each."""
    acls, who = ctx.acls, kafka_principal(principal)
    use_acls = acls is not None and principal.user is not None and not acls.empty_for(who)
    if not use_acls and principal.grants is None:
        return names
    out = []
    for name in names:
        decided = acls.decide(who, host, D, rtype, name) if use_acls else None
        if decided or (decided is None and _role_on(principal, (rtype, name, D)) >= Role.VIEWER):
            out.append(name)
    return out


def filters_listings(ctx, principal: Principal) -> bool:
    """Whether `principal`'s Metadata and ListGroups answers need `filter_listing`."""
    return ctx.acls is not None or principal.grants is not None


def filter_listing(ctx, req: Request, principal: Principal, body: Any) -> Any:
    """A Metadata (all topics) or ListGroups response without what the principal may not
    DESCRIBE."""
    if req.api_key == 3 and not resources(ctx, req):
        keep = set(visible(ctx, principal, req.client_host, T, [t.name for t in body.topics]))
        body.topics = [t for t in body.topics if t.name in keep]
    elif req.api_key == 16:
        keep = set(visible(ctx, principal, req.client_host, G, [g.group_id for g in body.groups]))
        body.groups = [g for g in body.groups if g.group_id in keep]
    return body


def denial(ctx, req: Request, principal: Principal) -> Callable[[], Any] | None:
    """`refusal`'s answer alone (None when allowed)."""
    refused = refusal(ctx, req, principal)
    return None if refused is None else refused.answer


def _answer(ctx, req: Request) -> Callable[[], Any]:
    build = _DENIALS.get(req.api_key)
    if build is None:  # an API without a per-resource answer: every error code set
        return lambda: codec.error_response_body(req.api_key, req.api_version, CLUSTER)
    return lambda: build(ctx, req)


# ---------------------------------------------------------------------- per API


def _produce(ctx, req: Request):
    if req.body.acks == 0:
        raise CloseConnection("acks=0 produce refused: the principal may not write")
    cls = codec.response_class(req.api_key).TopicProduceResponse
    part = cls.PartitionProduceResponse
    return codec.make_response(
        req,
        throttle_time_ms=0,
        responses=[
            cls(
                name=t.name,
                topic_id=t.topic_id,  # Produce v13 names topics by id
                partition_responses=[
                    part(
                        index=p.index,
                        error_code=TOPIC,
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[],
                        error_message=None,
                    )
                    for p in t.partition_data
                ],
            )
            for t in req.body.topic_data
        ],
    )


def _fetch(ctx, req: Request):
    cls = codec.response_class(req.api_key).FetchableTopicResponse
    topics = [
        cls(
            topic=t.topic,
            topic_id=getattr(t, "topic_id", None) or uuid.UUID(int=0),
            partitions=[
                cls.PartitionData(
                    partition_index=p.partition,
                    error_code=TOPIC,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=b"",
                )
                for p in t.partitions
            ],
        )
        for t in req.body.topics
    ]
    return codec.make_response(
        req, throttle_time_ms=0, error_code=0, session_id=0, responses=topics
    )


def _list_offsets(ctx, req: Request):
    cls = codec.response_class(req.api_key).ListOffsetsTopicResponse
    topics = [
        cls(
            name=t.name,
            partitions=[
                cls.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=TOPIC,
                    old_style_offsets=[],
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
                for p in t.partitions
            ],
        )
        for t in req.body.topics
    ]
    return codec.make_response(req, throttle_time_ms=0, topics=topics)


def _metadata(ctx, req: Request):
    cls = codec.response_class(req.api_key)
    named = req.body.topics is not None and not (req.api_version == 0 and not req.body.topics)
    topics = [
        cls.MetadataResponseTopic(
            error_code=TOPIC,
            name=t.name,
            topic_id=getattr(t, "topic_id", None) or uuid.UUID(int=0),  # v10+: maybe by id
            is_internal=False,
            partitions=[],
        )
        for t in (req.body.topics if named else ())
    ]
    broker = cls.MetadataResponseBroker(node_id=NODE_ID, host=ctx.host, port=ctx.port, rack=None)
    return codec.make_response(
        req,
        throttle_time_ms=0,
        brokers=[broker],
        cluster_id=ctx.cluster_id,
        controller_id=NODE_ID,
        topics=topics,
        error_code=0,
    )


def _offset_commit(ctx, req: Request):
    cls = codec.response_class(req.api_key).OffsetCommitResponseTopic
    topics = [
        cls(
            name=t.name,
            topic_id=t.topic_id,  # OffsetCommit v10 names topics by id
            partitions=[
                cls.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=GROUP
                )
                for p in t.partitions
            ],
        )
        for t in req.body.topics
    ]
    return codec.make_response(req, throttle_time_ms=0, topics=topics)


def _offset_fetch(ctx, req: Request):
    cls = codec.response_class(req.api_key)
    if req.api_version < 8:
        return codec.make_response(req, throttle_time_ms=0, topics=[], error_code=GROUP)
    groups = [
        cls.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=GROUP)
        for g in req.body.groups
    ]
    return codec.make_response(req, throttle_time_ms=0, groups=groups)


def _find_coordinator(ctx, req: Request):
    b = req.body
    code = (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if (req.api_version >= 1 and b.key_type == TRANSACTION_KEY_TYPE)
        else GROUP
    )
    if req.api_version < 4:
        return codec.make_response(
            req,
            throttle_time_ms=0,
            error_code=code,
            error_message="not authorized",
            node_id=-1,
            host="",
            port=-1,
        )
    cls = codec.response_class(req.api_key).Coordinator
    coordinators = [
        cls(key=key, node_id=-1, host="", port=-1, error_code=code, error_message="not authorized")
        for key in b.coordinator_keys
    ]
    return codec.make_response(req, throttle_time_ms=0, coordinators=coordinators)


def _group_error(ctx, req: Request):
    return codec.error_response_body(req.api_key, req.api_version, GROUP)


def _describe_groups(ctx, req: Request):
    cls = codec.response_class(req.api_key).DescribedGroup
    groups = [
        cls(
            error_code=GROUP,
            group_id=g,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=[],
        )
        for g in req.body.groups
    ]
    return codec.make_response(req, throttle_time_ms=0, groups=groups)


def _list_groups(ctx, req: Request):
    return codec.make_response(req, throttle_time_ms=0, error_code=0, groups=[])


def _create_topics(ctx, req: Request):
    cls = codec.response_class(req.api_key).CreatableTopicResult
    topics = [
        cls(
            name=t.name,
            topic_id=uuid.UUID(int=0),
            error_code=TOPIC,
            error_message="not authorized to create topics",
            num_partitions=-1,
            replication_factor=-1,
            configs=None,
        )
        for t in req.body.topics
    ]
    return codec.make_response(req, throttle_time_ms=0, topics=topics)


def _delete_topics(ctx, req: Request):
    cls = codec.response_class(req.api_key).DeletableTopicResult
    if req.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.body.topics]
    else:
        wanted = [(name, None) for name in req.body.topic_names]
    results = [
        cls(
            name=name,
            topic_id=topic_id or uuid.UUID(int=0),
            error_code=TOPIC,
            error_message="not authorized to delete topics",
        )
        for name, topic_id in wanted
    ]
    return codec.make_response(req, throttle_time_ms=0, responses=results)


def _delete_records(ctx, req: Request):
    cls = codec.response_class(req.api_key).DeleteRecordsTopicResult
    topics = [
        cls(
            name=t.name,
            partitions=[
                cls.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=-1, error_code=TOPIC
                )
                for p in t.partitions
            ],
        )
        for t in req.body.topics
    ]
    return codec.make_response(req, throttle_time_ms=0, topics=topics)


def _init_producer_id(ctx, req: Request):
    code = (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if (req.body.transactional_id is not None)
        else CLUSTER
    )
    return codec.make_response(
        req, throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1
    )


def _offset_for_leader_epoch(ctx, req: Request):
    cls = codec.response_class(req.api_key).OffsetForLeaderTopicResult
    topics = [
        cls(
            topic=t.topic,
            partitions=[
                cls.EpochEndOffset(
                    error_code=TOPIC, partition=p.partition, leader_epoch=-1, end_offset=-1
                )
                for p in t.partitions
            ],
        )
        for t in req.body.topics
    ]
    return codec.make_response(req, throttle_time_ms=0, topics=topics)


def _resource_code(resource_type: int) -> int:
    return CLUSTER if resource_type == BROKER_RESOURCE else TOPIC


def _describe_configs(ctx, req: Request):
    cls = codec.response_class(req.api_key).DescribeConfigsResult
    results = [
        cls(
            error_code=_resource_code(r.resource_type),
            error_message="not authorized",
            resource_type=r.resource_type,
            resource_name=r.resource_name,
            configs=[],
        )
        for r in req.body.resources
    ]
    return codec.make_response(req, throttle_time_ms=0, results=results)


def _alter_configs(ctx, req: Request):
    cls = codec.response_class(req.api_key).AlterConfigsResourceResponse
    responses = [
        cls(
            error_code=_resource_code(r.resource_type),
            error_message="not authorized",
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in req.body.resources
    ]
    return codec.make_response(req, throttle_time_ms=0, responses=responses)


def _create_partitions(ctx, req: Request):
    cls = codec.response_class(req.api_key).CreatePartitionsTopicResult
    results = [
        cls(name=t.name, error_code=TOPIC, error_message="not authorized") for t in req.body.topics
    ]
    return codec.make_response(req, throttle_time_ms=0, results=results)


def _delete_groups(ctx, req: Request):
    cls = codec.response_class(req.api_key).DeletableGroupResult
    results = [cls(group_id=g, error_code=GROUP) for g in req.body.groups_names]
    return codec.make_response(req, throttle_time_ms=0, results=results)


def _transactional(ctx, req: Request):
    return codec.error_response_body(
        req.api_key, req.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )


def _offset_delete(ctx, req: Request):
    return codec.make_response(req, error_code=GROUP, throttle_time_ms=0, topics=[])


def _describe_acls(ctx, req: Request):
    return codec.make_response(
        req, throttle_time_ms=0, error_code=CLUSTER, error_message="not authorized", resources=[]
    )


def _create_acls(ctx, req: Request):
    cls = codec.response_class(req.api_key).AclCreationResult
    results = [cls(error_code=CLUSTER, error_message="not authorized") for _ in req.body.creations]
    return codec.make_response(req, throttle_time_ms=0, results=results)


def _delete_acls(ctx, req: Request):
    cls = codec.response_class(req.api_key).DeleteAclsFilterResult
    results = [
        cls(error_code=CLUSTER, error_message="not authorized", matching_acls=[])
        for _ in req.body.filters
    ]
    return codec.make_response(req, throttle_time_ms=0, filter_results=results)


_DENIALS: dict[int, Callable[[Any, Request], Any]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group_error,  # JoinGroup
    12: _group_error,  # Heartbeat
    13: _group_error,  # LeaveGroup
    14: _group_error,  # SyncGroup
    15: _describe_groups,
    16: _list_groups,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    24: _transactional,  # AddPartitionsToTxn (its per-partition results stay empty)
    25: _transactional,
    26: _transactional,
    28: _transactional,  # TxnOffsetCommit
    29: _describe_acls,
    30: _create_acls,
    31: _delete_acls,
    32: _describe_configs,
    33: _alter_configs,
    37: _create_partitions,
    42: _delete_groups,
    44: _alter_configs,
    47: _offset_delete,
    # DescribeCluster (60) and anything else: every error code CLUSTER_AUTHORIZATION_FAILED
}
