"""Request validation and response shapes of the JSON API.

Request serializers check the shape of the input (types, required fields, base64, unknown keys)
and give ``invalid_request`` errors per field; what the input means (a valid topic name or
config, an existing partition, a reset strategy) is the engine's to decide, with its own codes.

Bytes (record keys, values, header values) go out as ``{"text", "base64", "size"}``: ``base64``
always, ``text`` when the bytes are valid UTF-8 (else null). They come in as a plain string
(UTF-8 text), ``{"base64": "..."}``, ``{"text": "..."}`` or null — so a fetched record can be
posted back as it is.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import logging
from collections.abc import Mapping

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

MAX_PRODUCE_RECORDS = 10_000
MAX_FETCH_RECORDS = 1000


def iso_ms(ms: int | None) -> str | None:
    if ms is None or ms < 0:
        return None
    when = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# =============================================================================== fields


class StrictSerializer(serializers.Serializer):
    # Refuses keys it does not know (a typo must not silently change what happens). `ignored`
    # lists keys that are accepted and dropped (read-only fields of a response). No docstring:
    # the schema would show it as every request body's description.

    ignored: tuple[str, ...] = ()

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields) - set(self.ignored))
            if unknown:
                known = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {k: [f"Unknown field; expected one of: {known}."] for k in unknown},
                    code="unknown_field",
                )
        return super().to_internal_value(data)


class TextField(serializers.CharField):
    """A string, and only a string (DRF's CharField also takes numbers)."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "description": "milliseconds since the Unix epoch"},
            {"type": "string", "format": "date-time"},
        ],
        "description": "milliseconds since the epoch, or an ISO-8601 date-time (no zone: UTC)",
    }
)
class TimestampField(serializers.Field):
    """Milliseconds since the epoch, or an ISO-8601 date-time (no zone means UTC) → ms."""

    default_error_messages = {
        "invalid": "Expected milliseconds since the epoch or an ISO-8601 date-time, got {input!r}.",
    }

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid", input=data)
        if isinstance(data, int):
            return data
        if isinstance(data, str):
            text = data.strip()
            if text.lstrip("-").isdigit():
                return int(text)
            try:
                when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                self.fail("invalid", input=data)
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            return int(when.timestamp() * 1000)
        self.fail("invalid", input=data)

    def to_representation(self, value):
        return value


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "description": "UTF-8 text"},
            {
                "type": "object",
                "properties": {
                    "base64": {"type": "string", "format": "byte"},
                    "text": {"type": "string"},
                },
                "description": "exact bytes as base64, or text (base64 wins when both are given)",
            },
        ],
        "nullable": True,
    }
)
class BytesField(serializers.Field):
    """Bytes from a string (UTF-8), ``{"base64": ...}``, ``{"text": ...}``; null → None."""

    default_error_messages = {
        "invalid": "Expected a string, an object with base64 or text, or null.",
        "invalid_base64": "Not valid base64: {error}.",
        "invalid_text": "Not encodable as UTF-8 (lone surrogate?).",
        "unknown_keys": "Unknown keys {keys}; use base64 or text.",
    }

    def to_internal_value(self, data):
        if isinstance(data, str):
            return self._text(data)
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - {"base64", "text", "size"})
            if unknown:
                self.fail("unknown_keys", keys=", ".join(unknown))
            if data.get("base64") is not None:
                raw = data["base64"]
                if not isinstance(raw, str):
                    self.fail("invalid_base64", error="expected a string")
                try:
                    return base64.b64decode(raw, validate=True)
                except (binascii.Error, ValueError) as exc:
                    self.fail("invalid_base64", error=str(exc).rstrip("."))
            if isinstance(data.get("text"), str):
                return self._text(data["text"])
        self.fail("invalid")

    def _text(self, text: str) -> bytes:
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            self.fail("invalid_text")

    def to_representation(self, value):
        return encode_bytes(value)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}]})
class ConfigValueField(serializers.Field):
    """A topic config value: a string or a number, kept as text (as Kafka does)."""

    default_error_messages = {"invalid": "Expected a string or a number."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, str | int | float):
            self.fail("invalid")
        return str(data)

    def to_representation(self, value):
        return value


def encode_bytes(value: bytes | None) -> dict | None:
    if value is None:
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"text": text, "base64": base64.b64encode(value).decode("ascii"), "size": len(value)}


class EncodedBytesSerializer(serializers.Serializer):
    text = serializers.CharField(allow_null=True, help_text="the bytes as UTF-8, or null")
    base64 = serializers.CharField(help_text="the exact bytes")
    size = serializers.IntegerField(help_text="bytes")

    def to_representation(self, instance):
        return encode_bytes(instance)


@extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
class IsoTimestampField(serializers.ReadOnlyField):
    """Renders a millisecond timestamp as ISO-8601 UTC."""

    def to_representation(self, value):
        return iso_ms(value)


# =============================================================================== errors


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="stable: branch on this")
    message = serializers.CharField(help_text="for people; may change")
    fields = serializers.DictField(
        required=False, help_text="invalid_request only: per field, [{message, code}]"
    )
    log_start_offset = serializers.IntegerField(required=False)
    end_offset = serializers.IntegerField(required=False)
    members = serializers.ListField(child=serializers.CharField(), required=False)


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


# =============================================================================== topics


class TopicListQuery(serializers.Serializer):
    filter = serializers.CharField(required=False, default="", allow_blank=True)
    include_internal = serializers.BooleanField(required=False, default=False)


class TopicSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    internal = serializers.BooleanField()
    partitions = serializers.IntegerField()
    record_count = serializers.IntegerField()
    size_bytes = serializers.IntegerField()
    cleanup_policy = serializers.CharField()
    retention_ms = serializers.IntegerField()
    last_append_ms = serializers.IntegerField(allow_null=True)
    last_append = IsoTimestampField(source="last_append_ms")


class TopicListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    topics = TopicSummarySerializer(many=True)


class TopicCreate(StrictSerializer):
    """A new topic: its name, partition count and config overrides."""

    name = TextField(allow_blank=True, trim_whitespace=False)
    partitions = serializers.IntegerField(default=1)
    config = serializers.DictField(child=ConfigValueField(), default=dict)


class DamagedRangeSerializer(serializers.Serializer):
    file = serializers.CharField(help_text="the segment file")
    start = serializers.IntegerField(help_text="first damaged byte")
    end = serializers.IntegerField(help_text="byte after the damage (= start: bytes missing)")
    first_offset = serializers.IntegerField()
    end_offset = serializers.IntegerField(help_text="offset after the damage")
    reason = serializers.CharField()
    found_ms = serializers.IntegerField()


class PartitionSerializer(serializers.Serializer):
    partition = serializers.IntegerField()
    log_start_offset = serializers.IntegerField()
    end_offset = serializers.IntegerField(help_text="high watermark: readable up to here")
    last_stable_offset = serializers.IntegerField(
        allow_null=True,
        help_text="LSO: first offset of the oldest open transaction, else the end offset; "
        "read_committed consumers read up to here (null: the cluster cannot tell)",
    )
    log_end_offset = serializers.IntegerField()
    record_count = serializers.IntegerField()
    size_bytes = serializers.IntegerField()
    segment_count = serializers.IntegerField()
    last_append_ms = serializers.IntegerField(allow_null=True)
    last_append = IsoTimestampField(source="last_append_ms")
    damaged = DamagedRangeSerializer(
        many=True,
        help_text="damaged ranges of the log on disk: reads there answer corrupt_record "
        "(`manage.py verify_log --repair` cuts them out)",
    )


class TopicGroupSerializer(serializers.Serializer):
    group_id = serializers.CharField()
    state = serializers.CharField()
    lag = serializers.IntegerField(help_text="records behind on this topic")


class TopicDetailSerializer(serializers.Serializer):
    name = serializers.CharField()
    topic_id = serializers.CharField()
    internal = serializers.BooleanField()
    created_ms = serializers.IntegerField()
    created = IsoTimestampField(source="created_ms")
    record_count = serializers.IntegerField()
    size_bytes = serializers.IntegerField()
    partitions = PartitionSerializer(many=True)
    config = serializers.DictField(child=serializers.CharField(), help_text="effective values")
    overrides = serializers.DictField(child=serializers.CharField(), help_text="set explicitly")
    groups = TopicGroupSerializer(many=True, help_text="consumer groups reading the topic")


class TopicConfigSerializer(serializers.Serializer):
    name = serializers.CharField()
    config = serializers.DictField(child=serializers.CharField(), help_text="effective values")
    overrides = serializers.DictField(child=serializers.CharField(), help_text="set explicitly")


class TopicConfigPatch(StrictSerializer):
    """Config keys to set and keys to reset to their default, validated together."""

    set = serializers.DictField(child=ConfigValueField(), default=dict)
    delete = serializers.ListField(
        child=TextField(), default=list, help_text="keys to reset to the default"
    )

    def validate(self, attrs):
        if not attrs["set"] and not attrs["delete"]:
            raise serializers.ValidationError("Give keys to set and/or keys to delete.")
        both = sorted(set(attrs["set"]) & set(attrs["delete"]))
        if both:
            raise serializers.ValidationError(f"Keys both set and deleted: {', '.join(both)}.")
        return attrs


class AddPartitions(StrictSerializer):
    """The new partition count of the topic."""

    total = serializers.IntegerField(help_text="the new partition count (can only grow)")


class Purge(StrictSerializer):
    """Which records to delete: exactly one of before_offset, before_timestamp, all."""

    partitions = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        allow_empty=False,
        help_text="default: every partition",
    )
    before_offset = serializers.IntegerField(
        required=False, help_text="delete records below this offset (clamped to the log)"
    )
    before_timestamp = TimestampField(
        required=False, help_text="delete records older than this time"
    )
    all = serializers.BooleanField(required=False, default=False, help_text="delete everything")

    def validate(self, attrs):
        chosen = [k for k in ("before_offset", "before_timestamp") if k in attrs]
        if attrs["all"]:
            chosen.append("all")
        if len(chosen) != 1:
            raise serializers.ValidationError(
                "Give exactly one of before_offset, before_timestamp or all=true.",
                code="purge_bound",
            )
        return attrs


class PurgePartitionSerializer(serializers.Serializer):
    partition = serializers.IntegerField()
    log_start_offset_before = serializers.IntegerField()
    log_start_offset_after = serializers.IntegerField()
    records_deleted = serializers.IntegerField()


class PurgeResultSerializer(serializers.Serializer):
    topic = serializers.CharField()
    records_deleted = serializers.IntegerField()
    partitions = PurgePartitionSerializer(many=True)


# =============================================================================== records


class RecordsQuery(serializers.Serializer):
    partition = serializers.IntegerField(help_text="the partition to read")
    offset = serializers.IntegerField(required=False, help_text="default: the log start")
    timestamp = TimestampField(
        required=False, help_text="start at the first record at or after this time"
    )
    limit = serializers.IntegerField(min_value=1, max_value=MAX_FETCH_RECORDS, default=100)

    def validate(self, attrs):
        if "offset" in attrs and "timestamp" in attrs:
            raise serializers.ValidationError("Give offset or timestamp, not both.")
        return attrs


class HeaderSerializer(serializers.Serializer):
    key = serializers.CharField()
    value = EncodedBytesSerializer(allow_null=True)

    def to_representation(self, instance):
        key, value = instance
        return {"key": key, "value": encode_bytes(value)}


class RecordSerializer(serializers.Serializer):
    partition = serializers.IntegerField()
    offset = serializers.IntegerField()
    timestamp_ms = serializers.IntegerField()
    timestamp = IsoTimestampField(source="timestamp_ms")
    key = EncodedBytesSerializer(allow_null=True)
    value = EncodedBytesSerializer(allow_null=True, help_text="null: a tombstone")
    headers = HeaderSerializer(many=True)
    size = serializers.IntegerField(help_text="key + value + header bytes")


class FetchResultSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    log_start_offset = serializers.IntegerField()
    end_offset = serializers.IntegerField()
    next_offset = serializers.IntegerField(help_text="where the next fetch continues")
    records = RecordSerializer(many=True)


class ProduceHeader(StrictSerializer):
    """A record header: a text key and a value (bytes or null)."""

    key = TextField(allow_blank=True, trim_whitespace=False)
    value = BytesField(allow_null=True)


class ProduceRecord(StrictSerializer):
    """One record to append. `offset` and `size` of a fetched record are ignored."""

    ignored = ("offset", "size")  # read-only fields of a fetched record, so it can be re-sent

    key = BytesField(required=False, allow_null=True, default=None)
    value = BytesField(allow_null=True, help_text="required; null is a tombstone")
    headers = ProduceHeader(many=True, required=False, default=list)
    partition = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="default: by the key's hash, or sticky for records without a key",
    )
    timestamp = TimestampField(required=False, allow_null=True, default=None)
    timestamp_ms = serializers.IntegerField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        ts, ms = attrs.pop("timestamp"), attrs.pop("timestamp_ms")
        if ts is not None and ms is not None and ts != ms:
            raise serializers.ValidationError(
                {"timestamp": [f"Disagrees with timestamp_ms ({ts} != {ms}); give one."]}
            )
        attrs["timestamp_ms"] = ts if ts is not None else ms
        return attrs


class Produce(StrictSerializer):
    """Records to append, in order."""

    records = ProduceRecord(many=True, allow_empty=False, max_length=MAX_PRODUCE_RECORDS)


class ProducedSerializer(serializers.Serializer):
    partition = serializers.IntegerField()
    offset = serializers.IntegerField()
    timestamp_ms = serializers.IntegerField()
    timestamp = IsoTimestampField(source="timestamp_ms")


class ProduceResultSerializer(serializers.Serializer):
    topic = serializers.CharField()
    records = ProducedSerializer(many=True, help_text="in the order of the request")


# =============================================================================== groups


class GroupSummarySerializer(serializers.Serializer):
    group_id = serializers.CharField()
    state = serializers.CharField()
    members = serializers.IntegerField()
    topics = serializers.ListField(child=serializers.CharField())
    total_lag = serializers.IntegerField()
    fallen_behind = serializers.IntegerField(
        help_text="partitions whose committed offset was deleted by retention"
    )


class PartitionHealthSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    status = serializers.CharField(help_text="OK, WARN, STALL, STOP, REWIND or ERR")
    reason = serializers.CharField()
    complete = serializers.BooleanField(help_text="the window held enough commits to judge")
    commits = serializers.IntegerField(help_text="commits in the window")
    lag_age_ms = serializers.IntegerField(
        allow_null=True, help_text="age of the oldest unconsumed record, ms"
    )
    consume_rate = serializers.FloatField(allow_null=True, help_text="records/s")
    produce_rate = serializers.FloatField(allow_null=True, help_text="records/s")
    catch_up_s = serializers.FloatField(allow_null=True, help_text="null: see catch_up_note")
    catch_up_note = serializers.CharField()
    retention_share = serializers.FloatField(
        allow_null=True, help_text="1.0: retention deletes unread records"
    )
    retention_note = serializers.CharField()


class GroupHealthSerializer(serializers.Serializer):
    """Burrow's rules over the broker's window of commits (streams/groups/evaluator.py)."""

    status = serializers.CharField(help_text="the worst partition's: OK … ERR")
    reason = serializers.CharField()
    lag_age_ms = serializers.IntegerField(allow_null=True)
    catch_up_s = serializers.FloatField(allow_null=True)
    catch_up_note = serializers.CharField()
    retention_share = serializers.FloatField(allow_null=True)
    partitions = PartitionHealthSerializer(many=True)


class GroupListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    groups = GroupSummarySerializer(many=True)


class GroupDescribeQuery(serializers.Serializer):
    lagging = serializers.BooleanField(
        required=False, default=False, help_text="only partitions with lag"
    )


class MemberSerializer(serializers.Serializer):
    member_id = serializers.CharField()
    client_id = serializers.CharField()
    host = serializers.CharField()
    assignment = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="topic → assigned partitions",
    )
    subscription = serializers.ListField(child=serializers.CharField())


class PartitionLagSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    committed_offset = serializers.IntegerField(source="committed", allow_null=True)
    log_start_offset = serializers.IntegerField()
    end_offset = serializers.IntegerField()
    lag = serializers.IntegerField(allow_null=True, help_text="null: never committed")
    member_id = serializers.CharField(allow_null=True)
    client_id = serializers.CharField(allow_null=True)
    host = serializers.CharField(allow_null=True)
    commit_timestamp_ms = serializers.IntegerField(allow_null=True)
    fallen_behind_retention = serializers.BooleanField()


class GroupDetailSerializer(serializers.Serializer):
    group_id = serializers.CharField(source="description.group_id")
    state = serializers.CharField(source="description.state")
    protocol_type = serializers.CharField(source="description.protocol_type")
    protocol = serializers.CharField(source="description.protocol", allow_null=True)
    generation = serializers.IntegerField(source="description.generation")
    leader_id = serializers.CharField(source="description.leader_id", allow_null=True)
    state_timestamp_ms = serializers.IntegerField(source="description.state_timestamp_ms")
    members = MemberSerializer(source="description.members", many=True)
    idle_members = serializers.ListField(child=serializers.CharField())
    total_lag = serializers.IntegerField(source="lag.total")
    partitions = PartitionLagSerializer(source="lag.partitions", many=True)
    health = serializers.SerializerMethodField(
        help_text="status by Burrow's rules, lag in time, time to catch up, share of retention; "
        "null on an external cluster (no broker of this process samples its commits)"
    )

    @extend_schema_field(GroupHealthSerializer(allow_null=True))
    def get_health(self, detail) -> dict | None:
        health = self.context.get("health")
        return GroupHealthSerializer(health).data if health is not None else None


log = logging.getLogger(__name__)


class AliasedChoiceField(serializers.ChoiceField):
    """A choice that also takes deprecated spellings (`aliases`: old → current), logged; the
    schema lists the current ones only."""

    def __init__(self, *, aliases: dict[str, str], **kwargs):
        self.aliases = aliases
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and data in self.aliases:
            log.warning(
                "API: %s %r is a deprecated spelling; send %r",
                self.field_name,
                data,
                self.aliases[data],
            )
            data = self.aliases[data]
        return super().to_internal_value(data)


class Reset(StrictSerializer):
    """An offset reset: a strategy (with its value) over a scope; a dry run by default.
    Values are spelled as ``kafka-consumer-groups.sh``'s flags, in kebab-case (``to-earliest``,
    ``all-topics``); field names are snake_case, as everywhere in the API."""

    strategy = TextField(
        help_text="to-earliest, to-latest, to-current, to-offset, shift-by, to-datetime, "
        "by-duration or from-file"
    )
    value = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
        help_text="to-offset/shift-by: a number; to-datetime: ISO-8601 or epoch ms; "
        "by-duration: ISO-8601 duration (PT1H); from-file: CSV text of topic,partition,offset",
    )
    scope = AliasedChoiceField(
        choices=["all-topics", "topic", "partitions"],
        aliases={"all_topics": "all-topics"},  # the spelling before 2026-12; still accepted
        error_messages={
            "invalid_choice": '"{input}" is not a valid choice: use all-topics, topic or '
            "partitions."
        },
        required=False,
        help_text="required except for from-file (the CSV names the partitions); "
        "all_topics is a deprecated spelling of all-topics",
    )
    topic = TextField(required=False, help_text="scope topic or partitions")
    partitions = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        allow_empty=False,
        help_text="scope partitions",
    )
    dry_run = serializers.BooleanField(
        default=True, help_text="true (default): only compute the plan; false: execute it"
    )

    def validate(self, attrs):
        from_file = attrs["strategy"].strip().lower().removeprefix("--") == "from-file"
        scope = attrs.get("scope")
        if from_file and scope is not None:
            raise serializers.ValidationError(
                {"scope": ["from-file takes its partitions from the CSV; leave scope out."]},
                code="invalid",
            )
        if scope is None and not from_file:
            raise serializers.ValidationError(
                {"scope": ["This field is required."]}, code="required"
            )
        if scope in ("topic", "partitions") and not attrs.get("topic"):
            raise serializers.ValidationError(
                {"topic": [f"Scope {scope} needs a topic."]}, code="required"
            )
        if scope == "partitions" and not attrs.get("partitions"):
            raise serializers.ValidationError(
                {"partitions": ["Scope partitions needs a list of partitions."]}, code="required"
            )
        if scope != "partitions" and "partitions" in attrs:
            raise serializers.ValidationError(
                {"partitions": ["Only with scope partitions."]}, code="invalid"
            )
        if scope not in ("topic", "partitions") and "topic" in attrs:
            raise serializers.ValidationError(
                {"topic": ["Only with scope topic or partitions."]}, code="invalid"
            )
        attrs["from_file"] = from_file
        return attrs


class PlanRowSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    current_offset = serializers.IntegerField(source="current", allow_null=True)
    requested_offset = serializers.IntegerField(source="requested")
    new_offset = serializers.IntegerField(source="target")
    log_start_offset = serializers.IntegerField()
    end_offset = serializers.IntegerField()
    clamped = serializers.CharField(
        source="clamp", allow_null=True, help_text="why the requested offset was moved"
    )
    records_to_replay = serializers.IntegerField(source="to_replay")
    records_to_skip = serializers.IntegerField(source="to_skip")
    changes = serializers.BooleanField()


class ResetResultSerializer(serializers.Serializer):
    group_id = serializers.CharField()
    strategy = serializers.CharField()
    group_state = serializers.CharField()
    dry_run = serializers.BooleanField()
    executed = serializers.BooleanField()
    executable = serializers.BooleanField(
        help_text="false while the group has active members (it must be Empty)"
    )
    blocked_reason = serializers.CharField(allow_null=True)
    total_replay = serializers.IntegerField()
    total_skip = serializers.IntegerField()
    rows = PlanRowSerializer(many=True)


class TopicPartitionSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()


class DeleteOffsetsResultSerializer(serializers.Serializer):
    group_id = serializers.CharField()
    topic = serializers.CharField()
    deleted = TopicPartitionSerializer(many=True)


# =============================================================================== transactions


class TransactionSerializer(serializers.Serializer):
    transactional_id = serializers.CharField()
    producer_id = serializers.IntegerField()
    producer_epoch = serializers.IntegerField()
    state = serializers.CharField(help_text="Ongoing, PrepareCommit or PrepareAbort (open ones)")
    groups = serializers.ListField(
        child=serializers.CharField(), help_text="consumer groups whose offsets it carries"
    )
    start_ms = serializers.IntegerField(help_text="when it began, epoch milliseconds")
    start = IsoTimestampField(source="start_ms")
    age_ms = serializers.IntegerField(allow_null=True, help_text="milliseconds open, at as_of")
    timeout_ms = serializers.IntegerField(help_text="transaction.timeout.ms of its producer")
    timeout_in_ms = serializers.IntegerField(
        allow_null=True, help_text="milliseconds until the coordinator aborts it (0: overdue)"
    )
    hanging = serializers.BooleanField(help_text="open longer than its timeout")

    partitions = serializers.SerializerMethodField()

    def get_partitions(self, row) -> list[dict]:
        return [{"topic": t, "partition": p} for t, p in row.partitions]


class TransactionListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    as_of_ms = serializers.IntegerField(help_text="when the coordinator was read, epoch ms")
    as_of = IsoTimestampField(source="as_of_ms")
    transactions = TransactionSerializer(many=True)


class TransactionAbort(StrictSerializer):
    producer_id = serializers.IntegerField(
        min_value=0, help_text="the producer id shown: refused (409) if it changed"
    )
    producer_epoch = serializers.IntegerField(
        min_value=0, help_text="the epoch shown: refused (409) if it changed"
    )
    start_ms = serializers.IntegerField(
        required=False,
        help_text="the transaction's start time shown (ms since the epoch): refused (409) if "
        "the ongoing transaction started at another time (a later one of the same epoch)",
    )


# =============================================================================== jobs


class JobErrorSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    offset = serializers.IntegerField(help_text="the failing record's offset")
    error = serializers.CharField()
    at_ms = serializers.IntegerField(help_text="when it failed, epoch ms")


class JobWorkerSerializer(serializers.Serializer):
    host = serializers.CharField()
    pid = serializers.IntegerField()
    status = serializers.CharField(help_text="starting, running, failed or stopped")
    started_ms = serializers.IntegerField(help_text="when the worker started, epoch ms")
    as_of_ms = serializers.IntegerField(help_text="when these numbers were taken, epoch ms")
    partitions = serializers.SerializerMethodField(help_text="input partitions it owns")
    records_in = serializers.IntegerField(help_text="records, since the worker started")
    records_out = serializers.IntegerField(help_text="records written to output topics")
    late = serializers.IntegerField(help_text="records after the watermark had passed them")
    dropped = serializers.IntegerField(help_text="late records without a late side output")
    lag_records = serializers.IntegerField(help_text="input records not yet read, in total")
    watermark_ms = serializers.IntegerField(
        allow_null=True, help_text="the slowest event-time watermark, epoch ms"
    )
    state_keys = serializers.DictField(
        child=serializers.IntegerField(), help_text="keys per state store"
    )
    last_checkpoint_ms = serializers.IntegerField(allow_null=True, help_text="epoch ms")
    last_checkpoint_duration_ms = serializers.FloatField(allow_null=True, help_text="ms")
    checkpoints = serializers.IntegerField()
    error_count = serializers.IntegerField()
    errors = JobErrorSerializer(many=True, help_text="the newest record errors")

    def get_partitions(self, worker) -> list[dict]:
        return [{"topic": t, "partition": p} for t, p in worker.partitions]


class JobLagSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    position = serializers.IntegerField(help_text="the next offset the job reads")
    end = serializers.IntegerField(help_text="the partition's end offset")
    lag_records = serializers.IntegerField()


class JobSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    state = serializers.CharField(help_text="stopped, starting, running or failed")
    failure = serializers.CharField(allow_null=True)
    inputs = serializers.ListField(child=serializers.CharField())
    outputs = serializers.ListField(child=serializers.CharField())
    late_outputs = serializers.ListField(
        child=serializers.CharField(), help_text="topics of its late side outputs"
    )
    age_ms = serializers.IntegerField(allow_null=True, help_text="how old the numbers are, ms")
    workers = JobWorkerSerializer(many=True)
    lag = JobLagSerializer(many=True, help_text="input lag per partition")
    watermarks = serializers.SerializerMethodField(help_text="per step and task, epoch ms")
    late_by_step = serializers.DictField(child=serializers.IntegerField())

    def get_watermarks(self, row) -> list[dict]:
        return [{"step": s, "task": t, "watermark_ms": w} for s, t, w in row.watermarks]


class JobListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    as_of_ms = serializers.IntegerField(help_text="when the jobs were read, epoch ms")
    as_of = IsoTimestampField(source="as_of_ms")
    jobs = JobSerializer(many=True)


# =============================================================================== capture


class CaptureSnapshotSerializer(serializers.Serializer):
    table = serializers.CharField(help_text="schema.table")
    keys = serializers.IntegerField(allow_null=True, help_text="keys asked for (null: all rows)")
    chunks = serializers.IntegerField()
    rows_written = serializers.IntegerField(help_text="rows written as read events (op r)")
    rows_dropped = serializers.IntegerField(help_text="read but changed inside their window")
    done = serializers.BooleanField()
    as_of_lsn = serializers.CharField(allow_null=True, help_text="last chunk's high watermark")
    as_of_offset = serializers.IntegerField(
        allow_null=True, help_text="log offset of its last record acknowledged so far"
    )


class CaptureSourceSerializer(serializers.Serializer):
    name = serializers.CharField()
    dsn = serializers.CharField(help_text="the connection string, its password masked")
    tables = serializers.ListField(child=serializers.CharField())
    topics = serializers.ListField(child=serializers.CharField())
    slot = serializers.CharField()
    publication = serializers.CharField()
    state = serializers.CharField(help_text="starting, running, stopped or failed")
    error = serializers.CharField(allow_null=True)
    started_ms = serializers.IntegerField(help_text="epoch ms")
    as_of_ms = serializers.IntegerField(help_text="when these numbers were taken, epoch ms")
    confirmed_lsn = serializers.CharField(help_text="the LSN confirmed to PostgreSQL")
    lag_bytes = serializers.IntegerField(
        allow_null=True, help_text="WAL bytes after the confirmed LSN (null: see lag_note)"
    )
    lag_note = serializers.CharField(allow_null=True, help_text="why lag_bytes is null")
    lag_seconds = serializers.FloatField(
        help_text="age of the oldest received transaction not yet in the log, seconds"
    )
    transactions = serializers.IntegerField()
    records = serializers.IntegerField(help_text="records written to the log")
    skipped_records = serializers.IntegerField(help_text="replays already in the log, skipped")
    schema_changes = serializers.ListField(child=serializers.CharField())
    snapshots = CaptureSnapshotSerializer(many=True)
    snapshots_paused = serializers.BooleanField()


class CaptureListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    as_of_ms = serializers.IntegerField(help_text="when the sources were read, epoch ms")
    sources = CaptureSourceSerializer(many=True)
