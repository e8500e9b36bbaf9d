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
to carry the error: its connection is closed, as Kafka does. Roles apply to whole requests
(they are not per topic), so nothing reaches a handler half-allowed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import NODE_ID, CloseConnection, ErrorCode
from streams.protocol.security import Principal, Role

TOPIC = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
BROKER_RESOURCE = 4
TRANSACTION_KEY_TYPE = 1

# API key -> the role it needs; OffsetCommit depends on the request (see `required_role`)
OPERATOR_APIS = {0, 19, 20, 21, 22, 24, 25, 26, 28, 33, 37, 42, 44, 47}
ANYONE_APIS = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate
OFFSET_COMMIT = 8


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


def denial(ctx, req: Request, principal: Principal) -> Callable[[], Any] | None:
    """None when `principal` may make `req`; otherwise a function returning Kafka's refusal
    (a response body, or raising CloseConnection)."""
    if principal.role >= required_role(req):
        return None
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
    32: _describe_configs,
    33: _alter_configs,
    37: _create_partitions,
    42: _delete_groups,
    44: _alter_configs,
    47: _offset_delete,
    # DescribeCluster (60) and anything else: every error code CLUSTER_AUTHORIZATION_FAILED
}
