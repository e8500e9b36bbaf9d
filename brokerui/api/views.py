"""The JSON API under ``/api/v1/``: a thin layer over the ``Cluster`` interface.

Each endpoint validates its input (``serializers``), makes one or two cluster calls, audits what
it changed (source ``api``) and renders the result. Engine errors become JSON errors with a
stable code in ``errors.exception_handler``.

Authentication is token (``Authorization: Token <key>``, from ``manage.py drf_create_token``) or
the console's session (with its CSRF token for unsafe methods). Django's LoginRequiredMiddleware
would redirect anonymous requests to the login page, so every API view is exempt from it
(``login_not_required``) and answers 401 JSON itself.
"""

from __future__ import annotations

import dataclasses
import time

from django.contrib.auth.decorators import login_not_required
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from brokerui.access.grants import GROUP, TOPIC
from brokerui.access.services import group_id, masker_for, visible_items
from brokerui.api import docs
from brokerui.api import serializers as s
from brokerui.api.errors import InternalTopic, error_body
from brokerui.api.permissions import OPERATOR_CODE, IsOperatorOrReadOnly
from brokerui.audit.services import Actor, process_sink
from brokerui.cluster import get_cluster
from brokerui.console.capture import services as capture_services
from brokerui.console.groups import services as group_services
from brokerui.console.jobs import services as job_services
from brokerui.console.live.feeds import capture_sources, embedded_jobs
from brokerui.console.messages import services as message_services
from brokerui.console.roles import may_operate, refusal_text
from brokerui.console.topics import services as topic_services
from brokerui.console.transactions import services as txn_services
from brokerui.schemas import console_reading
from streams.cluster import ProduceRequest
from streams.cluster.browse import BrowsedRecord
from streams.errors import InvalidConfig, UnknownPartition, Unsupported
from streams.groups import ResetScope, ResetStrategy
from streams.groups.reset import parse_offsets_csv
from streams.log.config import SCHEMA as TOPIC_CONFIG_SCHEMA

EMPTY_STATES = ("Empty", "Dead")


ERROR_MEANINGS = {
    400: "invalid input: invalid_request, or the engine's invalid_* code",
    401: "not_authenticated or authentication_failed",
    403: "operator_required, csrf_failed or internal_topic",
    404: "unknown_topic, unknown_partition, unknown_group or unknown_transactional_id",
    409: "topic_already_exists, group_not_empty (with the group's state and members) or "
    "invalid_txn_state (the transaction moved on)",
    413: "record_too_large or request_too_large",
    416: "offset_out_of_range, with log_start_offset and end_offset",
    501: "unsupported: not available on this cluster (transactions on an external cluster)",
}


def _errors(*statuses: int) -> dict:
    """Error responses of an operation (401 always)."""
    return {
        code: OpenApiResponse(s.ErrorSerializer, description=ERROR_MEANINGS[code])
        for code in (401, *statuses)
    }


class ApiAutoSchema(AutoSchema):
    """Responses are objects (lists come in an envelope with a count), never bare arrays."""

    def _is_list_view(self, serializer=None) -> bool:
        return False


class ApiViewSet(viewsets.ViewSet):
    # Authenticated; unsafe methods need the operator role; exempt from the login redirect.
    schema = ApiAutoSchema()
    permission_classes = [IsAuthenticated, IsOperatorOrReadOnly]
    lookup_value_regex = r"[^/]+"
    read_only_actions: tuple[str, ...] = ()

    @classmethod
    def as_view(cls, *args, **kwargs):
        return login_not_required(super().as_view(*args, **kwargs))

    def actor(self) -> Actor:
        return Actor(self.request.user, "api")


def _valid(serializer_class, data):
    ser = serializer_class(data=data)
    ser.is_valid(raise_exception=True)
    return ser.validated_data


def _refuse_internal(cluster, name: str) -> None:
    if cluster.is_internal(name):
        raise InternalTopic(
            f"{name!r} is an internal topic (its name starts with '__'); the broker manages "
            "it and the API does not change it",
            topic=name,
        )


# ===================================================================================== topics


def _with_stable_offsets(partitions, stable: list[int] | None) -> list[dict]:
    """The partitions' descriptions with each one's last stable offset (None: unknown)."""
    out = []
    for p in partitions:
        row = {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}
        row["record_count"] = p.record_count
        has = stable is not None and p.partition < len(stable)
        row["last_stable_offset"] = stable[p.partition] if has else None
        out.append(row)
    return out


def _topic_detail(cluster, name: str) -> dict:
    d = cluster.describe_topic(name)
    stable = txn_services.stable_offsets_read(cluster=cluster, topic=name)
    groups = [{"group_id": g, "state": st, "lag": lag} for g, st, lag in cluster.topic_groups(name)]
    return {
        "name": d.name,
        "topic_id": d.topic_id,
        "internal": d.internal,
        "created_ms": d.created_ms,
        "record_count": d.record_count,
        "size_bytes": d.size_bytes,
        "partitions": _with_stable_offsets(d.partitions, stable),
        "config": d.config,
        "overrides": d.overrides,
        "groups": groups,
    }


def _config_view(d) -> dict:
    return {"name": d.name, "config": d.config, "overrides": d.overrides}


NAME_PARAM = OpenApiParameter("name", str, OpenApiParameter.PATH, description="topic name")


@extend_schema(tags=["topics"])
class TopicViewSet(ApiViewSet):
    lookup_field = "name"
    read_only_actions = ("create",)  # the operator role is checked on the new topic's name

    @extend_schema(
        operation_id="topics_list",
        summary="List topics",
        parameters=[s.TopicListQuery],
        responses={200: s.TopicListSerializer, **_errors(400)},
    )
    def list(self, request):
        q = _valid(s.TopicListQuery, request.query_params)
        topics = get_cluster().list_topics(
            include_internal=q["include_internal"], name_filter=q["filter"]
        )
        topics = visible_items(request.user, TOPIC, topics)
        return Response(s.TopicListSerializer({"count": len(topics), "topics": topics}).data)

    @extend_schema(
        operation_id="topics_create",
        summary="Create a topic",
        request=s.TopicCreate,
        responses={201: s.TopicDetailSerializer, **_errors(400, 403, 409)},
    )
    def create(self, request):
        v = _valid(s.TopicCreate, request.data)
        if not may_operate(request.user, [(TOPIC, v["name"])]):
            why = refusal_text(request.user, [(TOPIC, v["name"])], "operator")
            raise PermissionDenied(why, code=OPERATOR_CODE)
        cluster = get_cluster()
        if cluster.is_internal(v["name"]):
            raise InternalTopic(
                "topic names starting with '__' are reserved for the broker's internal topics",
                topic=v["name"],
            )
        d = topic_services.topic_create(
            cluster=cluster,
            sink=process_sink(),
            actor=self.actor(),
            name=v["name"],
            partitions=v["partitions"],
            config=v["config"],
        )
        body = s.TopicDetailSerializer(_topic_detail(cluster, d.name)).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="topics_describe",
        parameters=[NAME_PARAM],
        summary="Describe a topic: partitions with offsets and sizes, config, groups reading it",
        responses={200: s.TopicDetailSerializer, **_errors(404)},
    )
    def retrieve(self, request, name: str):
        return Response(s.TopicDetailSerializer(_topic_detail(get_cluster(), name)).data)

    @extend_schema(
        operation_id="topics_delete",
        parameters=[NAME_PARAM],
        summary="Delete a topic and all its records",
        responses={204: None, **_errors(403, 404)},
    )
    def destroy(self, request, name: str):
        cluster = get_cluster()
        cluster.describe_topic(name)  # UnknownTopic: 404
        _refuse_internal(cluster, name)
        topic_services.topic_delete(
            cluster=cluster, sink=process_sink(), actor=self.actor(), name=name
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="topics_config",
        parameters=[NAME_PARAM],
        summary="Topic config: effective values and explicit overrides",
        responses={200: s.TopicConfigSerializer, **_errors(404)},
    )
    @action(detail=True, methods=["get"], url_path="config")
    def config(self, request, name: str):
        d = get_cluster().describe_topic(name)
        return Response(s.TopicConfigSerializer(_config_view(d)).data)

    @extend_schema(
        operation_id="topics_config_update",
        parameters=[NAME_PARAM],
        summary="Change topic config: set keys and/or delete them (back to the default)",
        request=s.TopicConfigPatch,
        responses={200: s.TopicConfigSerializer, **_errors(400, 403, 404)},
    )
    @config.mapping.patch
    def alter_config(self, request, name: str):
        v = _valid(s.TopicConfigPatch, request.data)
        for key in v["delete"]:  # the engine ignores unknown keys to delete: refuse them here
            if key not in TOPIC_CONFIG_SCHEMA:
                raise InvalidConfig(key, None, "unknown topic config, nothing to delete")
        cluster = get_cluster()
        cluster.describe_topic(name)  # UnknownTopic: 404
        _refuse_internal(cluster, name)
        d = topic_services.topic_config_update(
            cluster=cluster,
            sink=process_sink(),
            actor=self.actor(),
            name=name,
            set_=v["set"],
            delete=v["delete"],
        )
        return Response(s.TopicConfigSerializer(_config_view(d)).data)

    @extend_schema(
        operation_id="topics_add_partitions",
        parameters=[NAME_PARAM],
        summary="Add partitions (give the new total; partitions are never removed)",
        request=s.AddPartitions,
        responses={200: s.TopicDetailSerializer, **_errors(400, 403, 404)},
    )
    @action(detail=True, methods=["post"], url_path="partitions")
    def partitions(self, request, name: str):
        v = _valid(s.AddPartitions, request.data)
        cluster = get_cluster()
        cluster.describe_topic(name)  # UnknownTopic: 404
        _refuse_internal(cluster, name)
        topic_services.topic_partitions_add(
            cluster=cluster,
            sink=process_sink(),
            actor=self.actor(),
            name=name,
            total=v["total"],
        )
        return Response(s.TopicDetailSerializer(_topic_detail(cluster, name)).data)

    @extend_schema(
        operation_id="topics_purge",
        parameters=[NAME_PARAM],
        summary="Purge records: below an offset, before a time, or all (one or more partitions)",
        request=s.Purge,
        responses={200: s.PurgeResultSerializer, **_errors(400, 403, 404)},
    )
    @action(detail=True, methods=["post"], url_path="purge")
    def purge(self, request, name: str):
        v = _valid(s.Purge, request.data)
        cluster = get_cluster()
        cluster.describe_topic(name)
        _refuse_internal(cluster, name)
        result = topic_services.topic_purge(
            cluster=cluster,
            sink=process_sink(),
            actor=self.actor(),
            name=name,
            partitions=v.get("partitions"),
            before_offset=v.get("before_offset"),
            before_timestamp_ms=v.get("before_timestamp"),
        )
        rows = [
            {
                "partition": p,
                "log_start_offset_before": result.before[p],
                "log_start_offset_after": after,
                "records_deleted": after - result.before[p],
            }
            for p, after in sorted(result.after.items())
        ]
        body = {"topic": name, "records_deleted": result.records_deleted, "partitions": rows}
        return Response(s.PurgeResultSerializer(body).data)

    # ------------------------------------------------------------------------------ records

    @extend_schema(
        operation_id="records_fetch",
        tags=["records"],
        summary="Fetch records from one partition, from an offset or a timestamp",
        description=(
            "Starts at `offset`, at the first record at or after `timestamp`, or (neither) at "
            "the log start. An offset outside [log_start_offset, end_offset] is 416 "
            "`offset_out_of_range`, with both bounds in the body. Keys, values and header "
            "values come as `{text, base64, size}`; `text` is null when not UTF-8."
        ),
        parameters=[NAME_PARAM, s.RecordsQuery],
        responses={200: s.FetchResultSerializer, **_errors(400, 404, 416)},
    )
    @action(detail=True, methods=["get"], url_path="records")
    def records(self, request, name: str):
        q = _valid(s.RecordsQuery, request.query_params)
        cluster = get_cluster()
        d = cluster.describe_topic(name)
        p = q["partition"]
        if not 0 <= p < len(d.partitions):
            raise UnknownPartition(name, p, len(d.partitions))
        part = d.partitions[p]
        if "timestamp" in q:
            found = cluster.offset_for_timestamp(
                topic=name, partition=p, timestamp_ms=q["timestamp"]
            )
            offset = part.end_offset if found is None else found
        else:
            offset = q.get("offset", part.log_start_offset)
        recs = cluster.read(topic=name, partition=p, offset=offset, max_records=q["limit"])
        masker = masker_for(request.user, name)
        if masker:  # the fields this user may not see, masked (brokerui.access.masking)
            reading = console_reading()
            recs = [masker.record(r, reading.key(name), reading.value(name)) for r in recs]
        if recs:
            next_offset = recs[-1].offset + 1
        else:  # nothing at or after `offset` below the end (compaction may leave gaps)
            next_offset = max(offset, part.end_offset)
        body = {
            "topic": name,
            "partition": p,
            "log_start_offset": part.log_start_offset,
            "end_offset": max(part.end_offset, next_offset),
            "next_offset": next_offset,
            "records": [
                BrowsedRecord(name, p, r.offset, r.timestamp_ms, r.key, r.value, r.headers)
                for r in recs
            ],
        }
        return Response(s.FetchResultSerializer(body).data)

    @extend_schema(
        operation_id="records_produce",
        parameters=[NAME_PARAM],
        tags=["records"],
        summary="Produce one or more records",
        description=(
            'The body is `{"records": [...]}`, a list of records, or one record. Each record '
            "has `value` (required; null is a tombstone) and optionally `key`, `headers`, "
            '`partition` and `timestamp`; bytes are a UTF-8 string, `{"base64": ...}` or '
            "null. A fetched record can be posted back as it is (`offset` and `size` are "
            "ignored). Records are appended in order; if one is refused, the error carries "
            "`record_index` and the records already `produced`."
        ),
        request=s.Produce,
        responses={201: s.ProduceResultSerializer, **_errors(400, 403, 404, 413)},
    )
    @records.mapping.post
    def produce(self, request, name: str):
        data = request.data
        if isinstance(data, list):
            data = {"records": data}
        elif isinstance(data, dict) and "records" not in data and data:
            data = {"records": [data]}
        v = _valid(s.Produce, data)
        cluster = get_cluster()
        d = cluster.describe_topic(name)
        _refuse_internal(cluster, name)
        count = len(d.partitions)
        for i, r in enumerate(v["records"]):  # refuse before writing anything when we can
            if r["partition"] is not None and not 0 <= r["partition"] < count:
                exc = UnknownPartition(name, r["partition"], count)
                exc.record_index = i
                raise exc
        requests = [
            ProduceRequest(
                value=r["value"],
                key=r["key"],
                headers=tuple((h["key"], h["value"]) for h in r["headers"]),
                partition=r["partition"],
                timestamp_ms=r["timestamp_ms"],
            )
            for r in v["records"]
        ]
        done = message_services.records_produce(
            cluster=cluster,
            sink=process_sink(),
            actor=self.actor(),
            topic=name,
            records=requests,
        )
        produced = done.results
        if done.error is not None:
            exc = done.error
            exc.record_index = done.refused_index
            exc.produced = [
                {"partition": a.partition, "offset": a.offset, "timestamp_ms": a.timestamp_ms}
                for a in produced
            ]
            raise exc
        body = {"topic": name, "records": produced}
        return Response(s.ProduceResultSerializer(body).data, status=status.HTTP_201_CREATED)


# ===================================================================================== groups

GROUP_PARAM = OpenApiParameter(
    "group_id",
    str,
    OpenApiParameter.PATH,
    description=(
        "the group id as one path segment: `~` written `~7E`, `/` written `~2F`, an id of dots "
        "only with each dot as `~2E`, the empty id as `~`; then percent-encoded as usual"
    ),
)


@extend_schema(tags=["groups"])
class GroupViewSet(ApiViewSet):
    lookup_field = "group_id"
    lookup_value_converter = "group_id"  # brokerui/group_paths.py, as the console's routes
    read_only_actions = ("reset",)  # a dry run changes nothing; execution checks the role

    @extend_schema(
        operation_id="groups_list",
        summary="List consumer groups with state, members, topics and total lag",
        responses={200: s.GroupListSerializer, **_errors()},
    )
    def list(self, request):
        groups = visible_items(request.user, GROUP, get_cluster().list_groups(), name=group_id)
        return Response(s.GroupListSerializer({"count": len(groups), "groups": groups}).data)

    @extend_schema(
        operation_id="groups_describe",
        summary="Describe a group: members, and per partition committed offset, end and lag",
        parameters=[GROUP_PARAM, s.GroupDescribeQuery],
        responses={200: s.GroupDetailSerializer, **_errors(400, 404)},
    )
    def retrieve(self, request, group_id: str):
        q = _valid(s.GroupDescribeQuery, request.query_params)
        detail = get_cluster().describe_group(group_id)
        total = detail.lag.total
        if q["lagging"]:
            rows = tuple(p for p in detail.lag.partitions if p.lag)
            lag = dataclasses.replace(detail.lag, partitions=rows)
            detail = dataclasses.replace(detail, lag=lag)
        health = group_services.group_health_read(
            source=group_services.health_source(), group_id=group_id
        )
        body = s.GroupDetailSerializer(detail, context={"health": health}).data
        body["total_lag"] = total  # of every partition, also when only lagging ones are shown
        return Response(body)

    @extend_schema(
        operation_id="groups_delete",
        parameters=[GROUP_PARAM],
        summary="Delete a group and its committed offsets (only while it is Empty)",
        responses={204: None, **_errors(403, 404, 409)},
    )
    def destroy(self, request, group_id: str):
        group_services.group_delete(
            cluster=get_cluster(), sink=process_sink(), actor=self.actor(), group_id=group_id
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="groups_reset",
        parameters=[GROUP_PARAM],
        summary="Reset committed offsets: preview the plan (dry_run, default) or execute it",
        description=(
            "Every strategy of `kafka-consumer-groups.sh --reset-offsets`. Targets are clamped "
            "into [log start, log end] and each row says why. A preview is open to viewers; "
            "executing (`dry_run: false`) needs the operator role and an Empty group: otherwise "
            "409 `group_not_empty` with the group's `state` and active `members`."
        ),
        request=s.Reset,
        responses={200: s.ResetResultSerializer, **_errors(400, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"], url_path="reset")
    def reset(self, request, group_id: str):
        v = _valid(s.Reset, request.data)
        if not v["dry_run"] and not may_operate(request.user, [(GROUP, group_id)]):
            raise PermissionDenied(
                refusal_text(request.user, [(GROUP, group_id)], "operator"), code=OPERATOR_CODE
            )
        done = group_services.group_reset(
            cluster=get_cluster(),
            sink=process_sink(),
            actor=self.actor(),
            group_id=group_id,
            strategy=_strategy(v),
            scopes=[_scope(v)],
            execute=not v["dry_run"],
        )
        plan, executed = done.plan, done.executed
        executable = plan.group_state in EMPTY_STATES
        body = {
            "group_id": group_id,
            "strategy": plan.strategy.describe(),
            "group_state": plan.group_state,
            "dry_run": v["dry_run"],
            "executed": executed,
            "executable": executable,
            "blocked_reason": None if executable else group_services.busy_reason(plan.group_state),
            "total_replay": plan.total_replay,
            "total_skip": plan.total_skip,
            "rows": plan.rows,
        }
        return Response(s.ResetResultSerializer(body).data)

    @extend_schema(
        operation_id="groups_delete_offsets",
        summary="Delete a group's committed offsets for one topic",
        parameters=[GROUP_PARAM, OpenApiParameter("topic", str, OpenApiParameter.PATH)],
        responses={200: s.DeleteOffsetsResultSerializer, **_errors(403, 404, 409)},
    )
    @action(detail=True, methods=["delete"], url_path="offsets/<str:topic>")
    def delete_offsets(self, request, group_id: str, topic: str):
        cluster = get_cluster()
        deleted = group_services.group_offsets_delete(  # UnknownGroup: 404
            cluster=cluster,
            sink=process_sink(),
            actor=self.actor(),
            group_id=group_id,
            topic=topic,
        )
        body = {
            "group_id": group_id,
            "topic": topic,
            "deleted": [{"topic": t, "partition": p} for t, p in deleted],
        }
        return Response(s.DeleteOffsetsResultSerializer(body).data)


# =============================================================================== transactions

TXN_PARAM = OpenApiParameter(
    "transactional_id",
    str,
    OpenApiParameter.PATH,
    description="transactional id, written as group ids are (brokerui/group_paths.py)",
)


@extend_schema(tags=["transactions"])
class TransactionViewSet(ApiViewSet):
    lookup_field = "transactional_id"
    lookup_value_converter = "group_id"  # free text, as group ids

    @extend_schema(
        operation_id="transactions_list",
        summary="Open transactions: transactional id, producer id/epoch, state, partitions, "
        "age and timeout (kafka-transactions.sh list + describe)",
        responses={200: s.TransactionListSerializer, **_errors(501)},
    )
    def list(self, request):
        view = txn_services.transactions_read(cluster=get_cluster(), now_ms=_now_ms())
        if view.unavailable:
            raise Unsupported(view.unavailable)
        body = {"count": len(view.rows), "as_of_ms": view.as_of_ms, "transactions": view.rows}
        return Response(s.TransactionListSerializer(body).data)

    @extend_schema(
        operation_id="transactions_abort",
        parameters=[TXN_PARAM],
        summary="Abort an ongoing (hanging) transaction, as kafka-transactions.sh --abort",
        description=(
            "Writes ABORT markers to its partitions and bumps the producer's epoch (the "
            "producer is fenced). `producer_id` and `producer_epoch` are the ones you saw: if "
            "the transaction has moved on, 409 `invalid_txn_state` and nothing changes. Audited "
            "(`transaction.abort`)."
        ),
        request=s.TransactionAbort,
        responses={200: s.TransactionSerializer, **_errors(400, 403, 404, 409, 501)},
    )
    @action(detail=True, methods=["post"], url_path="abort")
    def abort(self, request, transactional_id: str):
        data = _valid(s.TransactionAbort, request.data)
        after = txn_services.transaction_abort(
            cluster=get_cluster(),
            sink=process_sink(),
            actor=self.actor(),
            transactional_id=transactional_id,
            **data,
        )
        row = txn_services.TransactionRow(after, _now_ms())
        return Response(s.TransactionSerializer(row).data)


# ====================================================================================== jobs


@extend_schema(tags=["jobs"])
class CaptureViewSet(ApiViewSet):
    @extend_schema(
        operation_id="capture_list",
        summary="Change data capture sources in the broker's process: tables, slot, confirmed "
        "LSN, lag in bytes and seconds, counts, snapshot progress, errors",
        responses={200: s.CaptureListSerializer, **_errors(501)},
    )
    def list(self, request):
        view = capture_services.capture_read(host=capture_sources(), now_ms=_now_ms())
        if view.unavailable:
            raise Unsupported(view.unavailable)
        body = {"count": len(view.sources), "as_of_ms": view.as_of_ms, "sources": view.sources}
        return Response(s.CaptureListSerializer(body).data)


class JobViewSet(ApiViewSet):
    lookup_field = "name"

    @extend_schema(
        operation_id="jobs_list",
        summary="Stream jobs in the broker's process: state, workers (host, pid, partitions), "
        "lag per partition, watermarks, late/dropped counts, state size, checkpoints, errors",
        responses={200: s.JobListSerializer, **_errors(501)},
    )
    def list(self, request):
        view = job_services.jobs_read(host=embedded_jobs(), now_ms=_now_ms())
        if view.unavailable:
            raise Unsupported(view.unavailable)
        body = {"count": len(view.rows), "as_of_ms": view.as_of_ms, "jobs": view.rows}
        return Response(s.JobListSerializer(body).data)

    @extend_schema(
        operation_id="jobs_read",
        summary="One stream job",
        responses={200: s.JobSerializer, **_errors(404, 501)},
    )
    def retrieve(self, request, name: str):
        row = job_services.job_read(host=embedded_jobs(), name=name, now_ms=_now_ms())
        return Response(s.JobSerializer(row).data)

    @extend_schema(
        operation_id="jobs_start",
        summary="Start a stream job (operators; audited as `job.start`)",
        description="409 `job_state_conflict` if it runs already; 400 if its inputs are "
        "missing (nothing runs then).",
        request=None,
        responses={200: s.JobSerializer, **_errors(400, 403, 404, 409, 501)},
    )
    @action(detail=True, methods=["post"], url_path="start")
    def start(self, request, name: str):
        status = job_services.job_start(
            host=_jobs_host(), name=name, sink=process_sink(), actor=self.actor()
        )
        return Response(s.JobSerializer(job_services.JobRow(status, _now_ms())).data)

    @extend_schema(
        operation_id="jobs_stop",
        summary="Stop a stream job after it commits what it holds (operators; audited as "
        "`job.stop`)",
        description="409 `job_state_conflict` if it is not running.",
        request=None,
        responses={200: s.JobSerializer, **_errors(403, 404, 409, 501)},
    )
    @action(detail=True, methods=["post"], url_path="stop")
    def stop(self, request, name: str):
        status = job_services.job_stop(
            host=_jobs_host(), name=name, sink=process_sink(), actor=self.actor()
        )
        return Response(s.JobSerializer(job_services.JobRow(status, _now_ms())).data)


def _jobs_host():
    host = embedded_jobs()
    if host is None:
        raise Unsupported(job_services.UNAVAILABLE)
    return host


def _now_ms() -> int:
    return int(time.time() * 1000)


def _strategy(v) -> ResetStrategy:
    kind = v["strategy"].strip().lower().removeprefix("--")
    value = v["value"]
    if v["from_file"]:
        # The engine's from-file reads a path on the server: the API takes the CSV text itself.
        return ResetStrategy("from-file", parse_offsets_csv(value or ""))
    return ResetStrategy.parse(kind, value)


def _scope(v) -> ResetScope:
    if v.get("scope") == "all-topics":
        return ResetScope(all_topics=True)
    if v.get("scope") == "topic":
        return ResetScope(topic=v["topic"])
    if v.get("scope") == "partitions":
        return ResetScope(topic=v["topic"], partitions=tuple(v["partitions"]))
    return ResetScope()  # from-file: the CSV names the partitions


# ================================================================================ schema, docs


class SchemaView(SpectacularAPIView):
    """The OpenAPI 3 schema: YAML, or JSON with ``?format=json``. Errors are JSON."""

    @classmethod
    def as_view(cls, *args, **kwargs):
        return login_not_required(super().as_view(*args, **kwargs))

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.status_code >= 400:
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = JSONRenderer.media_type
        return response


def docs_page(request):
    """Server-rendered reference built from the generated schema (no external assets)."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return render(request, "api/docs.html", {"nav": "api", **docs.build(schema)})


@login_not_required
def not_found(request, path: str = ""):
    hint = ""
    if path.endswith("/"):
        try:
            match = resolve(request.path_info.rstrip("/"))
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            hint = f" (API paths have no trailing slash: use {request.path_info.rstrip('/')})"
    return JsonResponse(
        error_body("not_found", f"no API endpoint at /api/v1/{path}{hint}"), status=404
    )
