"""Admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs and DeleteRecords.

They go through `LocalCluster`, the same services the console and the JSON API call, so the
rules are the same everywhere (internal topics refuse changes, configs are validated as a
whole, partitions are only ever added). A single node: replication factor 1 (or -1, "the
default") is the only one accepted.

Thread-safety: handlers run on the listener's event loop, one request of a connection at a
time (Produce and Fetch overlap later requests, see ``handlers``); blocking engine calls go
through ``BrokerContext.blocking``.
"""

from __future__ import annotations

import uuid
from typing import Any

from streams.cluster import LocalCluster
from streams.errors import InvalidConfig, TidelogError, UnknownTopic
from streams.log import TopicConfig, is_internal, validate_topic_name
from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import (
    NO_TOPIC_ID,
    BrokerContext,
    ErrorCode,
    domain_error_code,
    topic_for_id,
    topic_uuid,
)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _cluster(ctx: BrokerContext) -> LocalCluster:
    return LocalCluster(ctx.store, ctx.coordinator)


def _error(exc: TidelogError) -> tuple[int, str]:
    return domain_error_code(exc), str(exc)


# ---------------------------------------------------------------------- topics


async def handle_create_topics(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    result_cls = codec.response_class(req.api_key).CreatableTopicResult
    results = []
    for t in b.topics:
        code, message, desc = await _create_topic(ctx, t, b.validate_only)
        results.append(
            result_cls(
                name=t.name,
                topic_id=uuid.UUID(hex=desc.topic_id) if desc else uuid.UUID(int=0),
                error_code=code,
                error_message=message,
                num_partitions=len(desc.partitions) if desc else -1,
                replication_factor=1 if desc else -1,
                configs=_creatable_configs(result_cls, desc) if desc else None,
            )
        )
    return codec.make_response(req, throttle_time_ms=0, topics=results)


async def _create_topic(ctx: BrokerContext, t, validate_only: bool):
    """(error code, message, description or None) for one CreatableTopic."""
    partitions = t.num_partitions if t.num_partitions > 0 else ctx.config.default_partitions
    if t.assignments:
        if any(list(a.broker_ids) != [0] for a in t.assignments):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "this broker is node 0 only", None
        partitions = len(t.assignments)
    if t.replication_factor not in (-1, 1):
        message = f"replication factor {t.replication_factor}: a single node keeps one replica"
        return ErrorCode.INVALID_REPLICATION_FACTOR, message, None
    config = {c.name: c.value for c in t.configs if c.value is not None}
    try:
        if validate_only:
            validate_topic_name(t.name)
            TopicConfig.from_mapping(config)
            if t.name in ctx.store.list_topics():
                raise UnknownTopic(t.name)  # replaced below by TOPIC_ALREADY_EXISTS
            return 0, None, None
        desc = await ctx.blocking(
            lambda: _cluster(ctx).create_topic(name=t.name, partitions=partitions, config=config)
        )
        return 0, None, desc
    except UnknownTopic:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists", None
    except TidelogError as exc:
        return (*_error(exc), None)


def _creatable_configs(result_cls, desc) -> list:
    entry = result_cls.CreatableTopicConfigs
    return [
        entry(
            name=k,
            value=v,
            read_only=False,
            config_source=SOURCE_DYNAMIC_TOPIC if k in desc.overrides else SOURCE_DEFAULT,
            is_sensitive=False,
        )
        for k, v in sorted(desc.config.items())
    ]


async def handle_delete_topics(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    if req.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in b.topics]
    else:
        wanted = [(name, None) for name in b.topic_names]
    result_cls = codec.response_class(req.api_key).DeletableTopicResult
    results = []
    for name, topic_id in wanted:
        code, message = 0, None
        try:
            name = name or topic_for_id(ctx, topic_id)
            topic_id = topic_uuid(ctx, name)  # v6 answers with the id, asked by name or not
            await ctx.blocking(lambda n=name: _cluster(ctx).delete_topic(name=n))
        except TidelogError as exc:
            code, message = _error(exc)
        results.append(
            result_cls(
                name=name,
                topic_id=topic_id or NO_TOPIC_ID,
                error_code=code,
                error_message=message,
            )
        )
    return codec.make_response(req, throttle_time_ms=0, responses=results)


async def handle_create_partitions(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    result_cls = codec.response_class(req.api_key).CreatePartitionsTopicResult
    results = []
    for t in b.topics:
        code, message = 0, None
        try:
            if b.validate_only:
                current = ctx.store.partition_count(t.name)
                if t.count <= current:
                    code = ErrorCode.INVALID_PARTITIONS
                    message = f"topic {t.name!r} has {current} partitions already"
            else:
                await ctx.blocking(
                    lambda t=t: _cluster(ctx).add_partitions(name=t.name, total=t.count)
                )
        except TidelogError as exc:
            code, message = _error(exc)
        results.append(result_cls(name=t.name, error_code=code, error_message=message))
    return codec.make_response(req, throttle_time_ms=0, results=results)


async def handle_delete_records(ctx: BrokerContext, req: Request) -> Any:
    cls = codec.response_class(req.api_key).DeleteRecordsTopicResult
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            code, low = await _delete_records(ctx, t.name, p.partition_index, p.offset)
            parts.append(
                cls.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low, error_code=code
                )
            )
        topics.append(cls(name=t.name, partitions=parts))
    return codec.make_response(req, throttle_time_ms=0, topics=topics)


async def _delete_records(ctx: BrokerContext, topic: str, partition: int, offset: int):
    if is_internal(topic):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
    try:
        if not ctx.store.describe_topic(topic).config["cleanup.policy"].count("delete"):
            return ErrorCode.POLICY_VIOLATION, -1  # compact-only topics, as Kafka
        starts = await ctx.blocking(ctx.store.delete_records, topic, {partition: offset})
        return 0, starts[partition]
    except TidelogError as exc:
        return domain_error_code(exc), -1


# ---------------------------------------------------------------------- configs


def _broker_configs(ctx: BrokerContext) -> dict[str, str]:
    cfg = ctx.config
    return {
        "auto.create.topics.enable": str(cfg.auto_create_topics).lower(),
        "num.partitions": str(cfg.default_partitions),
        "socket.request.max.bytes": str(cfg.max_request_bytes),
        "broker.id": "0",
    }


async def handle_describe_configs(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    cls = codec.response_class(req.api_key).DescribeConfigsResult
    results = []
    for r in b.resources:
        code, message, entries = 0, None, []
        try:
            entries = _config_entries(ctx, r.resource_type, r.resource_name)
        except TidelogError as exc:
            code, message = _error(exc)
        if r.configuration_keys is not None:
            entries = [e for e in entries if e[0] in set(r.configuration_keys)]
        results.append(
            cls(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[_config_result(cls, req, b, *e) for e in entries],
            )
        )
    return codec.make_response(req, throttle_time_ms=0, results=results)


def _config_entries(ctx: BrokerContext, resource_type: int, name: str):
    """(name, value, source, doc) of a topic's or the broker's configs."""
    if resource_type == BROKER_RESOURCE:
        return [(k, v, SOURCE_STATIC_BROKER, None) for k, v in _broker_configs(ctx).items()]
    if resource_type != TOPIC_RESOURCE:
        raise InvalidConfig("resource_type", resource_type, "only topics and the broker")
    desc = ctx.store.describe_topic(name)
    from streams.log import TOPIC_CONFIG_SCHEMA as SCHEMA

    return [
        (
            k,
            v,
            SOURCE_DYNAMIC_TOPIC if k in desc.overrides else SOURCE_DEFAULT,
            SCHEMA[k][2] if k in SCHEMA else None,
        )
        for k, v in sorted(desc.config.items())
    ]


def _config_result(cls, req: Request, body, name, value, source, doc):
    entry_cls = cls.DescribeConfigsResourceResult
    synonyms = []
    if req.api_version >= 1 and body.include_synonyms:
        synonyms = [entry_cls.DescribeConfigsSynonym(name=name, value=value, source=source)]
    return entry_cls(
        name=name,
        value=value,
        read_only=source == SOURCE_STATIC_BROKER,
        config_source=source,
        is_default=source == SOURCE_DEFAULT,
        is_sensitive=False,
        synonyms=synonyms,
        config_type=0,
        documentation=doc if req.api_version >= 3 and body.include_documentation else None,
    )


async def handle_alter_configs(ctx: BrokerContext, req: Request) -> Any:
    """AlterConfigs replaces a topic's whole set of overrides."""

    def plan(overrides: dict[str, str], effective: dict[str, str], configs) -> tuple[dict, list]:
        wanted = {c.name: c.value for c in configs if c.value is not None}
        return wanted, [k for k in overrides if k not in wanted]

    return await _alter(ctx, req, plan)


async def handle_incremental_alter_configs(ctx: BrokerContext, req: Request) -> Any:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (for list-valued keys)."""

    def plan(overrides: dict[str, str], effective: dict[str, str], configs) -> tuple[dict, list]:
        set_, delete = {}, []
        for c in configs:
            items = [x for x in effective.get(c.name, "").split(",") if x]
            if c.config_operation == OP_SET:
                set_[c.name] = c.value
            elif c.config_operation == OP_DELETE:
                delete.append(c.name)
            elif c.config_operation == OP_APPEND:
                set_[c.name] = ",".join(items + [x for x in (c.value or "").split(",") if x])
            elif c.config_operation == OP_SUBTRACT:
                drop = set((c.value or "").split(","))
                set_[c.name] = ",".join(x for x in items if x not in drop)
            else:
                raise InvalidConfig(c.name, c.config_operation, "unknown config operation")
        return set_, delete

    return await _alter(ctx, req, plan)


async def _alter(ctx: BrokerContext, req: Request, plan):
    b = req.body
    cls = codec.response_class(req.api_key).AlterConfigsResourceResponse
    responses = []
    for r in b.resources:
        code, message = 0, None
        try:
            if r.resource_type != TOPIC_RESOURCE:
                raise InvalidConfig(r.resource_name, "", "broker configs are read-only here")
            desc = ctx.store.describe_topic(r.resource_name)
            set_, delete = plan(desc.overrides, desc.config, r.configs)
            if b.validate_only:
                TopicConfig.from_mapping(desc.overrides).updated(set_, tuple(delete))
            else:
                await ctx.blocking(
                    lambda r=r, s=set_, d=delete: _cluster(ctx).alter_topic_config(
                        name=r.resource_name, set_=s, delete=d
                    )
                )
        except TidelogError as exc:
            code, message = _error(exc)
        responses.append(
            cls(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    return codec.make_response(req, throttle_time_ms=0, responses=responses)
