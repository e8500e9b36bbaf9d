"""Errors of the JSON API: one body shape, a stable code, and an HTTP status per domain error.

Every error response is ::

    {"error": {"code": "unknown_topic", "message": "topic 'x' does not exist", ...details}}

``code`` is stable (clients branch on it); ``message`` is for people and may change. Details
are the attributes the engine's error carries (``topic``, ``partition``, ``log_start_offset``,
``end_offset``, ``group``, ``members``...), so a client can act on them without parsing text.

Status choices:

* ``Unknown*`` → 404; ``TopicAlreadyExists`` and ``GroupNotEmpty`` (and other coordinator
  refusals) → 409.
* ``RecordTooLarge`` → 413.
* ``OffsetOutOfRange`` → 416 (Range Not Satisfiable): the topic and partition exist but the
  requested position lies outside ``[log_start_offset, end_offset]``, which the body carries,
  so a client can tell "seek again" apart from a malformed request (400) or a missing partition
  (404) from the status alone.
* Every other engine refusal of bad input (``invalid_topic_name``, ``invalid_config``,
  ``invalid_partitions``, ``invalid_record``, ``invalid_reset``...) → 400.
* Requests the API itself refuses: ``invalid_request`` (400, with ``fields``: per field a list
  of ``{"message", "code"}``), ``parse_error`` (400, not JSON),
  ``request_too_large`` (413, with ``limit_bytes``: Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``;
  sent by ``brokerui.request_limits`` before the API runs),
  ``not_authenticated`` / ``authentication_failed`` (401), ``permission_denied``,
  ``operator_required``, ``csrf_failed``, ``internal_topic`` (403), ``not_found`` (404),
  ``method_not_allowed`` (405), ``unsupported_media_type`` (415).
* A broken or closed store is the server's problem: ``corrupt_record`` and ``log_damaged``
  (an offset in a damaged range of the log) → 500,
  ``storage_error`` (the disk refused a write: full, quota, I/O error) → 507,
  ``store_closed`` / ``data_dir_locked`` → 503; any unexpected exception → 500
  ``internal_error`` (logged with its traceback), never an HTML page.
"""

from __future__ import annotations

import logging

from rest_framework import exceptions, status
from rest_framework.response import Response

from brokerui.request_limits import too_large_message
from streams import errors as se
from streams.jobs.views import UnknownView, ViewTimeout, ViewUnavailable

log = logging.getLogger(__name__)

# First match along the exception's MRO wins.
DOMAIN_STATUS: dict[type, int] = {
    se.UnknownTopic: 404,
    se.UnknownPartition: 404,
    se.UnknownGroup: 404,
    se.UnknownTransactionalId: 404,
    se.UnknownJob: 404,
    se.JobStateConflict: 409,  # start a running job, stop a stopped one
    se.InvalidTxnState: 409,  # the transaction moved on since it was shown
    se.TopicAlreadyExists: 409,
    se.GroupNotEmpty: 409,
    se.InvalidSessionTimeout: 400,
    se.GroupError: 409,  # rebalance in progress, illegal generation, unknown member...
    se.RecordTooLarge: 413,
    se.OffsetOutOfRange: 416,
    se.InvalidTopicName: 400,
    se.InvalidConfig: 400,
    se.InvalidPartitions: 400,
    se.InvalidRecord: 400,
    se.InvalidResetSpec: 400,
    se.LogDamaged: 500,  # the log on disk is damaged at that offset: the server's problem
    se.CorruptRecord: 500,
    se.StorageError: 507,  # Insufficient Storage: nothing was stored, retry once there is room
    se.StoreClosed: 503,
    se.DataDirLocked: 503,
    se.ClusterUnavailable: 503,  # TIDELOG_CLUSTER: the external cluster does not answer
    se.ClusterError: 502,
    se.Unsupported: 501,
    UnknownView: 404,
    ViewUnavailable: 503,  # its partition is rebalancing, stopped or served elsewhere
    ViewTimeout: 504,  # the view did not reach the offsets asked for in time
    se.TidelogError: 400,
}

# Engine attribute names that read badly in an API body.
RENAMED = {"count": "partition_count"}


class APIError(exceptions.APIException):
    """A refusal by the API layer itself (not the engine), with optional details."""

    def __init__(self, message: str, **details):
        super().__init__(message, self.default_code)
        self.details = details


class InternalTopic(APIError):
    status_code = status.HTTP_403_FORBIDDEN
    default_code = "internal_topic"


class RequestTooLarge(APIError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"

    @classmethod
    def of(cls, limit: int) -> RequestTooLarge:
        """A body over `limit` bytes (``DATA_UPLOAD_MAX_MEMORY_SIZE``), with the limit."""
        message = too_large_message(limit) + "; send fewer records per request"
        return cls(message, limit_bytes=limit)


def status_for(exc: se.TidelogError) -> int:
    for cls in type(exc).__mro__:
        if cls in DOMAIN_STATUS:
            return DOMAIN_STATUS[cls]
    return 400


def _json_safe(value):
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return str(value)


def domain_details(exc: Exception) -> dict:
    """The public attributes of an engine error (and any the API added, like `produced`)."""
    return {
        RENAMED.get(k, k): _json_safe(v)
        for k, v in vars(exc).items()
        if not k.startswith("_") and k not in ("code", "message")
    }


def error_body(code: str, message: str, **details) -> dict:
    return {"error": {"code": code, "message": message, **details}}


def _flatten(detail, path: str = "") -> list[str]:
    """`records[0].key: Not valid base64.` lines from a nested ValidationError detail."""
    if isinstance(detail, dict):
        out = []
        for k, v in detail.items():
            if str(k).isdigit():  # a list's item (DRF keys list errors by index)
                out += _flatten(v, f"{path}[{k}]")
                continue
            key = "" if k == "non_field_errors" else str(k)
            out += _flatten(v, f"{path}.{key}" if path and key else path or key)
        return out
    if isinstance(detail, list):
        if all(isinstance(d, str) for d in detail):
            return [f"{path}: {d}" if path else str(d) for d in detail]
        out = []
        for i, v in enumerate(detail):
            if v:
                out += _flatten(v, f"{path}[{i}]")
        return out
    return [f"{path}: {detail}" if path else str(detail)]


def _validation_body(exc: exceptions.ValidationError) -> dict:
    full = exc.get_full_details()
    if not isinstance(full, dict):
        full = {"non_field_errors": full if isinstance(full, list) else [full]}
    lines = _flatten(exc.detail)
    message = "; ".join(lines[:5]) + (f" (and {len(lines) - 5} more)" if len(lines) > 5 else "")
    return error_body("invalid_request", message or "invalid request", fields=full)


def exception_handler(exc, context):
    """DRF's EXCEPTION_HANDLER: every error as ``{"error": {"code", "message", ...}}``."""
    if isinstance(exc, se.TidelogError):
        code = status_for(exc)
        if code >= 500:
            log.error("API %s: %s", exc.code, exc)
            return Response(error_body(exc.code, str(exc)), status=code)
        return Response(error_body(exc.code, str(exc), **domain_details(exc)), status=code)

    # imported here: rest_framework.views loads the parser setting, whose parser imports us
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)  # APIException, Http404, PermissionDenied
    if response is None:
        log.exception("unexpected error in %s", context.get("view").__class__.__name__)
        return Response(
            error_body("internal_error", "internal server error; the server log has details"),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    if isinstance(exc, exceptions.ValidationError):
        response.data = _validation_body(exc)
        return response
    if not isinstance(exc, exceptions.APIException):  # Django's Http404 / PermissionDenied
        exc = (
            exceptions.NotFound(*exc.args)
            if response.status_code == 404
            else exceptions.PermissionDenied(*exc.args)
        )
    detail = exc.detail
    message = str(detail)
    code = getattr(detail, "code", None) or exc.default_code
    if message.startswith("CSRF Failed"):
        code = "csrf_failed"
    response.data = error_body(str(code), message, **getattr(exc, "details", {}))
    return response
