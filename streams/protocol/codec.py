"""Kafka wire codec: request frames in, response frames out, no I/O (as tansu's sans-io codec).

Message schemas come from kafka-python's ``kafka.protocol`` package, which is generated from
Apache Kafka's JSON message definitions and covers every version up to Kafka 4.x, flexible
(KIP-482, tagged fields) ones included. This module adds what a *server* needs around it:

- the request header is peeked by hand (api key, version, correlation id: the first 8 bytes, the
  same in every header version), so an unknown key or version is recognised before decoding;
- every decoding failure — truncated, garbage, absurd lengths — becomes ``ProtocolError``, the
  only exception leaving this module for bad input;
- ApiVersions of a version the broker does not support is answered with Kafka's v0-format
  fallback (UNSUPPORTED_VERSION plus the supported ranges, response header v0), which is what
  kafka-python's and librdkafka's version negotiation rely on;
- a request for an API Kafka defines but this broker does not serve can be answered in that
  API's own response shape, every ``error_code`` UNSUPPORTED_VERSION and everything else empty
  (``unsupported_api_response``), so the connection stays usable;
- Produce, the request every record arrives in, and a transaction's AddPartitionsToTxn,
  EndTxn, AddOffsetsToTxn and TxnOffsetCommit are decoded and answered by ``fastcodec``
  (written out with ``struct``; kafka-python's codec stays their reference and their
  fallback).

A frame here is a request *without* its 4-byte size prefix; an encoded response *has* it.

Thread-safety: pure functions over immutable tables; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from kafka.protocol import admin, consumer, metadata, producer, sasl
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

from streams.errors import ProtocolError
from streams.protocol import fastcodec

API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35
_HEADER_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")

VersionRanges = Mapping[int, tuple[int, int]]


class UnsupportedRequest(ProtocolError):
    """A well-framed request whose API key or version this broker does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        super().__init__(f"unsupported API key {api_key} version {api_version}")
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id


class Request(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kafka-python request message (fields in snake_case)
    client_host: str = ""  # set by the server: the peer's address
    principal: Any = None  # set by the server: the connection's security.Principal


def _message_classes() -> tuple[dict[int, type], dict[int, type]]:
    requests: dict[int, type] = {}
    responses: dict[int, type] = {}
    for module in (admin, consumer, metadata, producer, sasl):
        for name in getattr(module, "__all__", ()):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, ApiMessage):
                table = requests if cls.is_request() else responses
                table[cls.API_KEY] = cls
    return requests, responses


REQUEST_CLASSES, RESPONSE_CLASSES = _message_classes()
# the requests of a transactional produce, decoded by hand (``fastcodec``)
_FAST_DECODERS = fastcodec.DECODERS


def request_class(api_key: int) -> type:
    return REQUEST_CLASSES[api_key]


def response_class(api_key: int) -> type:
    return RESPONSE_CLASSES[api_key]


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame."""
    if len(frame) < _HEADER_PREFIX.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    return _HEADER_PREFIX.unpack_from(frame, 0)


def decode_request(frame: bytes | memoryview, versions: VersionRanges) -> Request:
    """Decode one request frame whose API version lies in `versions` (key -> (min, max)).

    Raises UnsupportedRequest for keys or versions outside `versions`, ProtocolError for
    anything that does not decode.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    bounds = versions.get(api_key)
    if bounds is None or not bounds[0] <= api_version <= bounds[1]:
        raise UnsupportedRequest(api_key, api_version, correlation_id)
    fast_decode = _FAST_DECODERS.get(api_key)
    if fast_decode is not None and type(frame) is bytes:
        fast = fast_decode(frame)
        if fast is not None:  # else the generic decoder answers (and says what is wrong)
            return Request(api_key, *fast)
    cls = REQUEST_CLASSES[api_key]
    try:
        body = cls.decode(memoryview(frame), version=api_version, header=True)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the client's bad frame
        raise ProtocolError(
            f"cannot decode {cls.__name__} v{api_version}: {type(exc).__name__}: {exc}"
        ) from None
    null = first_forbidden_null(body, api_key, api_version)
    if null is not None:
        raise ProtocolError(
            f"cannot decode {cls.__name__} v{api_version}: {null} is null, which Kafka's "
            "schema allows only for nullable fields"
        )
    return Request(api_key, api_version, correlation_id, body.header.client_id, body)


# (attribute, wire name, nullable, is an array, the checks of its elements or struct)
_NullChecks = tuple[tuple[str, str, bool, bool, tuple], ...]
_NULL_CHECKS: dict[tuple[int, int], _NullChecks] = {}
_NULLABLE_TYPES = frozenset({"string", "bytes", "records"})  # and arrays and structs


def _null_checks(fields: Mapping[str, Any], version: int) -> _NullChecks:
    """What of a message's `fields` (kafka-python's, from Kafka's JSON schemas) must not be
    null in `version`: the fields present in that version, untagged (a tagged field left out
    takes its default), not nullable in it, or nesting such a field."""
    checks = []
    for attr, field in fields.items():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        if not (field.is_array() or field.is_struct() or field.type_str in _NULLABLE_TYPES):
            continue  # a number, a boolean or a uuid: never null on the wire
        nested = field.is_struct_array() or field.is_struct()
        sub = _null_checks(field.fields, version) if nested else ()
        nullable = field.nullable_for_version_q(version)
        if not nullable or sub:
            checks.append((attr, field.name, nullable, field.is_array(), sub))
    return tuple(checks)


def first_forbidden_null(body: Any, api_key: int, api_version: int) -> str | None:
    """The path of the first field of a decoded request that is null where Kafka's schema
    allows no null (``TopicData[0].PartitionData``), or None. kafka-python's generic decoder
    reads a -1 length as null whether or not the field may be null; Kafka's own parser refuses
    such a request, and so does ``decode_request``, before a handler meets a None it cannot
    iterate."""
    checks = _NULL_CHECKS.get((api_key, api_version))
    if checks is None:
        checks = _null_checks(REQUEST_CLASSES[api_key].fields, api_version)
        _NULL_CHECKS[(api_key, api_version)] = checks
    return _first_null(body, checks)


def _first_null(obj: Any, checks: _NullChecks) -> str | None:
    for attr, name, nullable, is_array, sub in checks:
        value = getattr(obj, attr, None)
        if value is None:
            if not nullable:
                return name
            continue
        if not sub:
            continue
        for i, item in enumerate(value) if is_array else ((None, value),):
            found = _first_null(item, sub)
            if found is not None:
                return f"{name}{'' if i is None else f'[{i}]'}.{found}"
    return None


def encode_response(request: Request, body: Any) -> bytearray:
    """The framed response to `request` (header version chosen by the request's version). A
    handler may answer with the framed bytes already (``fastcodec``): they are the response."""
    if isinstance(body, bytearray | bytes):
        return body  # type: ignore[return-value]
    if body.version != request.api_version:
        raise ValueError(f"response v{body.version} for a v{request.api_version} request")
    body.with_header(correlation_id=request.correlation_id)
    return body.encode(header=True, framed=True)  # a fresh bytearray, not a pooled buffer


def make_response(request: Request, **fields: Any) -> Any:
    """A response message of the request's API and version, with `fields` set."""
    return RESPONSE_CLASSES[request.api_key][request.api_version](**fields)


def api_versions_body(versions: VersionRanges, api_version: int, error_code: int = 0) -> Any:
    cls = RESPONSE_CLASSES[API_VERSIONS_KEY][api_version]
    keys = [
        cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(versions.items())
    ]
    return cls(error_code=error_code, api_keys=keys, throttle_time_ms=0)


def api_versions_fallback(correlation_id: int, versions: VersionRanges) -> bytes:
    """Kafka's answer to an ApiVersions request of an unsupported version: a v0 body with
    UNSUPPORTED_VERSION and the supported ranges, under response header v0."""
    body = api_versions_body(versions, 0, UNSUPPORTED_VERSION)
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))


def is_kafka_api(api_key: int) -> bool:
    """Whether Apache Kafka defines `api_key` (served here or not)."""
    return api_key in ApiKey._value2member_map_


def unsupported_api_response(api_key: int, api_version: int, correlation_id: int) -> bytes | None:
    """The framed answer to a request of an API this broker does not serve: the API's response
    of that version with every ``error_code`` UNSUPPORTED_VERSION and everything else at its
    default (empty arrays, nulls, zeros). None when kafka-python has no response shape for
    that key and version (the caller then closes the connection)."""
    body = error_response_body(api_key, api_version, UNSUPPORTED_VERSION)
    if body is None:
        return None
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))


def error_response_body(api_key: int, api_version: int, code: int) -> Any:
    """The API's response of that version with every ``error_code`` set to `code` and
    everything else at its default (empty arrays, nulls, zeros); None when kafka-python has no
    response shape for that key and version."""
    cls = RESPONSE_CLASSES.get(api_key)
    if cls is None or not cls.min_version <= api_version <= cls.max_version:
        return None
    body = cls[api_version]()
    _set_error_codes(body, api_version, code)
    return body


def _set_error_codes(data: Any, version: int, code: int) -> None:
    """Set every ``error_code`` of `data` and of its (non-null, non-array) nested structs;
    arrays stay empty, so they hold none."""
    for field in data._struct._fields:
        if not field.for_version_q(version):
            continue
        if field.name == "error_code":
            setattr(data, field.name, code)
        elif field.is_struct() and getattr(data, field.name) is not None:
            _set_error_codes(getattr(data, field.name), version, code)


def frame_size(prefix: bytes) -> int:
    """The size announced by a 4-byte frame prefix."""
    return _SIZE.unpack(prefix)[0]
