"""ApiVersions, Metadata, FindCoordinator and DescribeCluster: how clients find this broker,
its topics and its coordinator. A single node: it leads every partition and coordinates every
group; partitions report leader epoch 0.

Every topic carries its id (KIP-516, v10+), and v10+ requests may ask for a topic by id alone.
Topics named in a Metadata request are created when missing, as Kafka does with
``auto.create.topics.enable`` (v4+ requests may opt out with ``allow_auto_topic_creation``), for
principals who may create topics (operators, or anyone on a listener without authentication).

Thread-safety: handlers run on the listener's event loop, one request of a connection at a
time (Produce and Fetch overlap later requests, see ``handlers``); blocking engine calls go
through ``BrokerContext.blocking``.
"""

from __future__ import annotations

import uuid
from typing import Any

from streams.errors import TidelogError, UnknownTopic
from streams.log import is_internal
from streams.protocol import codec
from streams.protocol.authz import may_create_topic
from streams.protocol.codec import Request
from streams.protocol.handlers.common import (
    NO_TOPIC_ID,
    NODE_ID,
    BrokerContext,
    ErrorCode,
    error_code,
    log,
    topic_for_id,
)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


async def handle_api_versions(ctx: BrokerContext, req: Request) -> Any:
    from streams.protocol.handlers import SUPPORTED_VERSIONS

    return codec.api_versions_body(SUPPORTED_VERSIONS, req.api_version)


async def handle_metadata(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    cls = codec.response_class(req.api_key)
    if body.topics is None or (req.api_version == 0 and not body.topics):
        wanted = [(n, None) for n in ctx.store.list_topics(include_internal=True)]  # v0: all
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in body.topics]
    may_create = ctx.config.auto_create_topics and (
        req.api_version < 4 or body.allow_auto_topic_creation
    )
    topics = []
    for name, topic_id in wanted:
        if name is None:  # v10+: asked for by id only
            topics.append(_topic_by_id(ctx, cls, topic_id))
        else:
            create = may_create and (
                req.principal is None or may_create_topic(ctx, req.principal, req.client_host, name)
            )
            topics.append(await _topic_metadata(ctx, cls, name, create))
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


async def ensure_topic(ctx: BrokerContext, name: str) -> bool:
    """Create `name` with the default partition count if auto-creation allows; True if it
    exists afterwards."""
    if name in ctx.store.list_topics():
        return True
    if not ctx.config.auto_create_topics or is_internal(name):
        return False
    try:
        await ctx.blocking(ctx.store.create_topic, name, ctx.config.default_partitions)
        log.info("auto-created topic %s with %d partitions", name, ctx.config.default_partitions)
    except TidelogError as exc:
        if name not in ctx.store.list_topics():
            raise exc
    return True


def _topic_by_id(ctx: BrokerContext, cls, topic_id: uuid.UUID | None):
    """A v10+ topic asked for by id (KIP-516): described under its name, or UNKNOWN_TOPIC_ID
    (never auto-created: an id cannot name a new topic)."""
    try:
        name = topic_for_id(ctx, topic_id)
        return _described(cls, ctx.store.describe_topic(name))
    except TidelogError as exc:
        return cls.MetadataResponseTopic(
            error_code=error_code(exc),
            name=None,
            topic_id=topic_id or NO_TOPIC_ID,
            is_internal=False,
            partitions=[],
        )


async def _topic_metadata(ctx: BrokerContext, cls, name: str, may_create: bool):
    try:
        if may_create:
            await ensure_topic(ctx, name)
        desc = ctx.store.describe_topic(name)
    except TidelogError as exc:
        code = error_code(exc) if not isinstance(exc, UnknownTopic) else 3
        return cls.MetadataResponseTopic(
            error_code=code,
            name=name,
            topic_id=NO_TOPIC_ID,
            is_internal=False,
            partitions=[],
        )
    return _described(cls, desc)


def _described(cls, desc):
    partitions = [
        cls.MetadataResponseTopic.MetadataResponsePartition(
            error_code=0,
            partition_index=p.partition,
            leader_id=NODE_ID,
            leader_epoch=0,
            replica_nodes=[NODE_ID],
            isr_nodes=[NODE_ID],
            offline_replicas=[],
        )
        for p in desc.partitions
    ]
    return cls.MetadataResponseTopic(
        error_code=0,
        name=desc.name,
        topic_id=uuid.UUID(hex=desc.topic_id),
        is_internal=desc.internal,
        partitions=partitions,
    )


async def handle_find_coordinator(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    supported = body.key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE)
    code = 0 if supported else ErrorCode.INVALID_REQUEST
    message = None if supported else f"unknown coordinator key type {body.key_type}"
    if req.api_version < 4:
        return codec.make_response(
            req,
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            node_id=NODE_ID if supported else -1,
            host=ctx.host if supported else "",
            port=ctx.port if supported else -1,
        )
    cls = codec.response_class(req.api_key)
    coordinators = [
        cls.Coordinator(
            key=key,
            node_id=NODE_ID if supported else -1,
            host=ctx.host if supported else "",
            port=ctx.port if supported else -1,
            error_code=code,
            error_message=message,
        )
        for key in body.coordinator_keys
    ]
    return codec.make_response(req, throttle_time_ms=0, coordinators=coordinators)


async def handle_describe_cluster(ctx: BrokerContext, req: Request) -> Any:
    cls = codec.response_class(req.api_key)
    broker = cls.DescribeClusterBroker(
        broker_id=NODE_ID, host=ctx.host, port=ctx.port, rack=None, is_fenced=False
    )
    return codec.make_response(
        req,
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.cluster_id,
        controller_id=NODE_ID,
        brokers=[broker],
    )
