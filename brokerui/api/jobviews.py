"""The JSON API's view queries: the tables running jobs maintain, read while they run
(``brokerui.console.jobviews.services``; one service call per endpoint)."""

from __future__ import annotations

import functools

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from brokerui.access.services import masker_for
from brokerui.api.views import ApiViewSet, _errors
from brokerui.console.jobviews import services

_TEXT = OpenApiTypes.STR
_INT = OpenApiTypes.INT
READ_PARAMS = [
    OpenApiParameter("job", _TEXT, OpenApiParameter.PATH, description="the job's name"),
    OpenApiParameter("view", _TEXT, OpenApiParameter.PATH, description="the table's step name"),
    OpenApiParameter(
        "key", _TEXT, description="a key (text); its row, or a windowed view's windows"
    ),
    OpenApiParameter("key_json", _TEXT, description="a key as JSON (numbers, lists)"),
    OpenApiParameter("from", _TEXT, description="key range: lowest key (text), inclusive"),
    OpenApiParameter("to", _TEXT, description="key range: highest key (text), inclusive"),
    OpenApiParameter("from_json", _TEXT, description="key range: lowest key as JSON"),
    OpenApiParameter("to_json", _TEXT, description="key range: highest key as JSON"),
    OpenApiParameter("time_from", _INT, description="windowed: window start >= this (ms)"),
    OpenApiParameter("time_to", _INT, description="windowed: window start <= this (ms)"),
    OpenApiParameter("limit", _INT, description="at most this many rows (1..1000, 1000)"),
    OpenApiParameter(
        "wait_for",
        _TEXT,
        description="topic:partition:offset,... — wait until the view reflects every input "
        "record below these offsets (read-your-writes after a produce)",
    ),
    OpenApiParameter("timeout_ms", _INT, description="longest wait (0..60000 ms, 5000)"),
]


@extend_schema(tags=["views"])
class JobViewViewSet(ApiViewSet):
    @extend_schema(
        operation_id="views_list",
        summary="The tables (views) of the jobs running in this server: kind, partitions "
        "served, rows, as of",
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="{count, views}"),
            **_errors(),
        },
    )
    def list(self, request):
        rows = services.views_list(source=services.view_source())
        return Response({"count": len(rows), "views": rows})

    @extend_schema(
        operation_id="views_read",
        summary="Query a job's table while it runs: by key, key range, or key and window "
        "time; answers carry the input offsets and watermark they reflect",
        parameters=READ_PARAMS,
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="{job, view, windowed, query, rows: [{key, row}], truncated, "
                "consistency: {offsets: {topic: {partition: next offset}}, watermark_ms, "
                "as_of_ms}}",
            ),
            **_errors(400, 404),
            503: OpenApiResponse(description="view_unavailable: its partition is not served"),
            504: OpenApiResponse(description="view_timeout: wait_for not reached in time"),
        },
    )
    def read(self, request, job: str, view: str):
        body = services.view_read(
            source=services.view_source(),
            job=job,
            view=view,
            params=request.query_params,
            masker_for=functools.partial(masker_for, request.user),
        )
        return Response(body)
