"""Per-topic configuration: Kafka's keys, defaults and validation.

Values are kept as Kafka presents them (strings in, typed values out). Tidelog differs from Kafka
in one default on purpose: ``flush.messages`` is 1, so an append is acknowledged only once it is on
disk (group commit shares one fdatasync among concurrent appenders). Set ``flush.messages`` higher
and/or ``flush.ms`` to trade durability for latency, as in Kafka.

A key a topic leaves unset takes the store's default (``TopicConfig.defaults``, Kafka's broker
configs such as ``log.flush.interval.messages``; ``LogStore.open(topic_defaults=...)``), else the
built-in one of ``SCHEMA``. ``KAFKA_FLUSH_DEFAULTS`` is Kafka's default flush policy (no fdatasync
before an acknowledgement) with a flush at least once a second.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from streams.errors import InvalidConfig, InvalidTopicName
from streams.log import compression

LONG_MAX = 2**63 - 1
MAX_TOPIC_NAME = 249
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1..249 characters of [a-zA-Z0-9._-], and not '.' or '..'."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicName("topic name must not be empty")
    if name in (".", ".."):
        raise InvalidTopicName(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicName(
            f"topic name is {len(name)} characters long; the limit is {MAX_TOPIC_NAME}"
        )
    if not _TOPIC_RE.match(name):
        bad = sorted({c for c in name if not re.match(r"[a-zA-Z0-9._-]", c)})
        raise InvalidTopicName(
            f"topic name {name!r} contains {''.join(bad)!r}; "
            "allowed are ASCII letters, digits, '.', '_' and '-'"
        )


def _long(lo: int, hi: int = LONG_MAX) -> Callable[[str, Any], int]:
    def parse(key: str, raw: Any) -> int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise InvalidConfig(key, raw, "must be an integer") from None
        if not lo <= value <= hi:
            raise InvalidConfig(key, raw, f"must be between {lo} and {hi}")
        return value

    return parse


def _ratio(key: str, raw: Any) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise InvalidConfig(key, raw, "must be a number") from None
    if not 0.0 <= value <= 1.0:
        raise InvalidConfig(key, raw, "must be between 0 and 1")
    return value


def _choice(*allowed: str) -> Callable[[str, Any], str]:
    def parse(key: str, raw: Any) -> str:
        value = str(raw).strip()
        if value not in allowed:
            raise InvalidConfig(key, raw, f"must be one of {', '.join(allowed)}")
        return value

    return parse


def _boolean(key: str, raw: Any) -> str:
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise InvalidConfig(key, raw, "must be true or false")
    return value


def _cleanup_policy(key: str, raw: Any) -> str:
    parts = {p.strip() for p in str(raw).split(",") if p.strip()}
    if not parts or not parts <= {"delete", "compact"}:
        raise InvalidConfig(key, raw, "must be delete, compact or compact,delete")
    return ",".join(sorted(parts, key=lambda p: p != "compact"))  # "compact,delete"


_COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")

# key -> (default, parser, what it means)
SCHEMA: dict[str, tuple[str, Callable[[str, Any], Any], str]] = {
    "cleanup.policy": ("delete", _cleanup_policy, "delete old segments, compact by key, or both"),
    "retention.ms": ("604800000", _long(-1), "delete segments older than this; -1 keeps forever"),
    "retention.bytes": ("-1", _long(-1), "delete oldest segments beyond this size; -1: no limit"),
    "segment.bytes": ("1073741824", _long(1024, 2**31 - 1), "roll a segment at this size"),
    "segment.ms": ("604800000", _long(1), "roll a segment after this long"),
    "max.message.bytes": ("1048588", _long(0, 2**31 - 1), "largest record batch accepted"),
    "min.compaction.lag.ms": ("0", _long(0), "records younger than this are not compacted"),
    "min.cleanable.dirty.ratio": ("0.5", _ratio, "clean when this share of the log is dirty"),
    "delete.retention.ms": ("86400000", _long(0), "how long tombstones survive compaction"),
    "message.timestamp.type": (
        "CreateTime",
        _choice("CreateTime", "LogAppendTime"),
        "whose clock stamps the records",
    ),
    "compression.type": (
        "producer",
        _choice(*_COMPRESSION_TYPES),
        "codec for stored batches; producer keeps the client's",
    ),
    "flush.messages": ("1", _long(1), "fdatasync after this many records (1: every append)"),
    "flush.ms": (str(LONG_MAX), _long(0), "fdatasync at least this often"),
    "index.interval.bytes": ("4096", _long(0, 2**31 - 1), "bytes between sparse index entries"),
    # Confluent Server's names: a produce whose values (keys) are not in the schema registry's
    # wire format with an id of the topic's <topic>-value (-key) subject is refused
    "confluent.value.schema.validation": (
        "false",
        _boolean,
        "refuse values not written with a schema of <topic>-value",
    ),
    "confluent.key.schema.validation": (
        "false",
        _boolean,
        "refuse keys not written with a schema of <topic>-key",
    ),
}


# Kafka's flush policy as it ships (log.flush.interval.messages = Long.MAX, no flush.ms): an
# append is acknowledged once it is in the page cache, so it survives a crash of the broker
# process (SIGKILL) but not of the machine (power loss, kernel panic) until the next fdatasync.
# Here the store also fdatasyncs every partition at least once a second (``flush.ms``), which
# bounds both what a power loss can take and the log a restart must re-validate.
KAFKA_FLUSH_DEFAULTS = {"flush.messages": str(LONG_MAX), "flush.ms": "1000"}


def _normalised(values: Mapping[str, Any] | None) -> dict[str, str]:
    """Validated keys and values, as strings; InvalidConfig for an unknown key or bad value."""
    normalised = {}
    for key, raw in dict(values or {}).items():
        if key not in SCHEMA:
            raise InvalidConfig(key, raw, "unknown topic config")
        parsed = SCHEMA[key][1](key, raw)
        normalised[key] = parsed if isinstance(parsed, str) else str(raw).strip()
    return normalised


@dataclasses.dataclass(frozen=True)
class TopicConfig:
    """Validated, typed topic configuration. `overrides` are the keys set explicitly on the
    topic; `defaults` the store's defaults for the others (Kafka's broker configs), in front of
    the built-in ones."""

    overrides: Mapping[str, str] = dataclasses.field(default_factory=dict)
    defaults: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        typed = {}
        for key, (default, parse, _) in SCHEMA.items():
            raw = self.overrides.get(key, self.defaults.get(key, default))
            typed[key] = parse(key, raw)
        for key, raw in (*self.overrides.items(), *self.defaults.items()):
            if key not in SCHEMA:
                raise InvalidConfig(key, raw, "unknown topic config")
        object.__setattr__(self, "_typed", typed)

    @classmethod
    def from_mapping(
        cls, values: Mapping[str, Any] | None, defaults: Mapping[str, Any] | None = None
    ) -> TopicConfig:
        return cls(_normalised(values), _normalised(defaults))

    def get(self, key: str) -> Any:
        return self._typed[key]

    def as_dict(self) -> dict[str, str]:
        """Every key with its effective value, as strings (what describe shows)."""
        return {
            key: str(self.overrides.get(key, self.defaults.get(key, default)))
            for key, (default, *_) in SCHEMA.items()
        }

    def updated(self, set_: Mapping[str, Any], delete: tuple[str, ...] = ()) -> TopicConfig:
        """The same topic with keys set and/or reset (to the store's or built-in default)."""
        merged = {k: v for k, v in self.overrides.items() if k not in delete}
        merged.update(set_)
        return TopicConfig.from_mapping(merged, self.defaults)

    # typed accessors for the hot path -------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in self.get("cleanup.policy")

    @property
    def delete(self) -> bool:
        return "delete" in self.get("cleanup.policy")

    @property
    def codec(self) -> int | None:
        """Codec to write with; None means keep what the producer sent."""
        name = self.get("compression.type")
        return None if name == "producer" else compression.BY_NAME[name]

    @property
    def log_append_time(self) -> bool:
        return self.get("message.timestamp.type") == "LogAppendTime"

    @property
    def schema_validation(self) -> tuple[bool, bool]:
        """(keys, values): whether produced keys and values must name a registered schema."""
        return (
            self.get("confluent.key.schema.validation") == "true",
            self.get("confluent.value.schema.validation") == "true",
        )
