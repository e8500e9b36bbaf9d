"""Topic forms: parse what people type, let the engine judge it, keep the engine's words.

The engine (``streams.log.config``) is the only judge of names and configs; these forms only turn
"7 d" or "64 MB" into the integers Kafka's keys take, and attach each engine error to the field it
is about, so the page can show it next to that field with what the user typed still in place.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from datetime import UTC, datetime

from django import forms

from streams.errors import InvalidConfig, InvalidTopicName
from streams.log.config import SCHEMA, TopicConfig, validate_topic_name
from streams.log.store import MAX_PARTITIONS

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
GB = 1024**3

RETENTION_PRESETS = [
    (str(HOUR_MS), "1 hour"),
    (str(6 * HOUR_MS), "6 hours"),
    (str(DAY_MS), "1 day"),
    (str(7 * DAY_MS), "7 days"),
    (str(30 * DAY_MS), "30 days"),
    ("-1", "forever"),
]
RETENTION_BYTES_PRESETS = [
    ("-1", "unlimited"),
    (str(1 * GB), "1 GB"),
    (str(10 * GB), "10 GB"),
    (str(50 * GB), "50 GB"),
]
CLEANUP_POLICIES = [
    ("delete", "delete (old segments go)"),
    ("compact", "compact (latest per key)"),
    ("compact,delete", "compact,delete (both)"),
]

# form field -> topic config key, for the fields that are configs
CONFIG_FIELDS = {
    "cleanup_policy": "cleanup.policy",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "segment_bytes": "segment.bytes",
    "max_message_bytes": "max.message.bytes",
}

# help under each field of the create form (replaced by the engine's message when it refuses)
CREATE_HELP = {
    "name": "Letters, digits, '.', '_' and '-'; up to 249 characters.",
    "partitions": "Consumers in a group share partitions: more partitions, more parallel "
    "readers. You can add partitions later, never remove them.",
    "cleanup_policy": "Compacted topics keep the latest value of every key; a record with a key "
    "and no value (a tombstone) deletes it.",
    "retention_ms": "Segments older than this are deleted (with cleanup.policy delete). Another "
    "value? Add retention.ms=… below.",
    "retention_bytes": "The oldest segments go first once a partition is larger than this.",
    "segment_bytes": "Bytes, or with a unit: 64 MB, 512 KB. Retention deletes whole segments.",
    "max_message_bytes": "Bytes, or with a unit: 4 MB.",
    "configs": "Durations and sizes may have units (7d, 12h, 64 MB). The broker checks each line.",
}

INTERNAL_PREFIX = "__"

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": GB,
    "gb": GB,
    "gib": GB,
}
_DURATION_UNITS = {
    "": 1,
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": HOUR_MS,
    "d": DAY_MS,
    "w": 7 * DAY_MS,
}
_QUANTITY = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> str:
    """'64 MB' -> '67108864' (powers of 1024, as the console shows sizes). Anything else comes
    back unchanged, for the engine to refuse with its own message."""
    return _quantity(text, _SIZE_UNITS)


def parse_duration(text: str) -> str:
    """'7d' -> '604800000', '90 min' -> '5400000'; 'forever' -> '-1'. Otherwise unchanged."""
    if text.strip().lower() in ("forever", "never", "infinite", "unlimited"):
        return "-1"
    return _quantity(text, _DURATION_UNITS)


def _quantity(text: str, units: dict[str, int]) -> str:
    m = _QUANTITY.match(text or "")
    if not m or m.group(2).lower() not in units:
        return text.strip() if isinstance(text, str) else text
    number, unit = m.group(1), units[m.group(2).lower()]
    if "." not in number:
        return str(int(number) * unit)
    value = float(number) * unit
    return str(int(value)) if value == int(value) else text.strip()


def parse_config_value(key: str, text: str) -> str:
    """Accept people's units for the keys that take milliseconds or bytes."""
    if key.endswith(".ms"):
        return parse_duration(text)
    if key.endswith(".bytes"):
        return parse_size(text)
    return text.strip()


def engine_check(key: str, value: str) -> str | None:
    """The engine's verdict on one key=value: None when valid, else its message."""
    try:
        TopicConfig.from_mapping({key: value})
    except InvalidConfig as e:
        if key not in SCHEMA:
            near = difflib.get_close_matches(key, SCHEMA, n=1)
            hint = f"did you mean {near[0]}?" if near else "the topic page lists the known keys"
            return f"{key} is not a topic config ({e.reason}); {hint}"
        return f"{key}: {e.reason} (got {value!r})"
    return None


def parse_config_lines(text: str) -> tuple[dict[str, str], list[str]]:
    """'key=value' lines (blank lines and # comments skipped) -> ({key: value}, errors)."""
    configs: dict[str, str] = {}
    errors: list[str] = []
    for number, raw in enumerate((text or "").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            errors.append(f"line {number}: expected key=value, got {line!r}")
            continue
        if key in configs:
            errors.append(f"line {number}: {key} is given twice")
            continue
        value = parse_config_value(key, value)
        problem = engine_check(key, value)
        if problem:
            errors.append(f"line {number}: {problem}")
        configs[key] = value
    return configs, errors


class TopicCreateForm(forms.Form):
    name = forms.CharField(max_length=1000, strip=True)
    partitions = forms.IntegerField(initial=1)
    cleanup_policy = forms.ChoiceField(choices=CLEANUP_POLICIES, initial="delete")
    retention_ms = forms.ChoiceField(choices=RETENTION_PRESETS, initial=str(7 * DAY_MS))
    retention_bytes = forms.ChoiceField(choices=RETENTION_BYTES_PRESETS, initial="-1")
    segment_bytes = forms.CharField(required=False, max_length=100)
    max_message_bytes = forms.CharField(required=False, max_length=100)
    configs = forms.CharField(required=False, widget=forms.Textarea, max_length=20_000)

    def __init__(self, *args, existing: set[str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.existing = existing or set()
        self.config: dict[str, str] = {}

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        try:
            validate_topic_name(name)
        except InvalidTopicName as e:
            raise forms.ValidationError(str(e)) from None
        if name.startswith(INTERNAL_PREFIX):
            raise forms.ValidationError(
                f"names starting with {INTERNAL_PREFIX!r} are reserved for Tidelog's internal "
                "topics (such as __consumer_offsets and __audit)"
            )
        if name in self.existing:
            raise forms.ValidationError(f"topic {name!r} already exists")
        return name

    def clean_partitions(self) -> int:
        n = self.cleaned_data["partitions"]
        if not 1 <= n <= MAX_PARTITIONS:
            raise forms.ValidationError(
                f"partition count must be between 1 and {MAX_PARTITIONS:,}, got {n}"
            )
        return n

    def clean(self):
        data = super().clean()
        config: dict[str, str] = {}
        for field, key in CONFIG_FIELDS.items():
            raw = data.get(field)
            if raw in (None, ""):
                continue
            value = parse_config_value(key, raw)
            problem = engine_check(key, value)
            if problem:
                self.add_error(field, problem)
            elif value != SCHEMA[key][0]:  # only what differs from the default is an override
                config[key] = value
        custom, errors = parse_config_lines(data.get("configs", ""))
        for key in custom:
            field = next((f for f, k in CONFIG_FIELDS.items() if k == key), None)
            if field and key in config:
                errors.append(f"{key} is already set by the field above; set it in one place")
        for error in errors:
            self.add_error("configs", error)
        config.update(custom)
        self.config = config
        return data


class AddPartitionsForm(forms.Form):
    total = forms.IntegerField(label="New total number of partitions")


class DeleteTopicForm(forms.Form):
    confirm = forms.CharField(max_length=1000, strip=True, required=True)

    def __init__(self, *args, topic: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.topic = topic

    def clean_confirm(self) -> str:
        typed = self.cleaned_data["confirm"]
        if typed != self.topic:
            raise forms.ValidationError(
                f"type the topic name exactly ({self.topic}) to confirm; you typed {typed!r}"
            )
        return typed


PURGE_MODES = [
    ("offset", "before an offset"),
    ("timestamp", "before a time"),
    ("all", "everything (up to the end)"),
]


def parse_utc(text: str) -> int | None:
    """A time typed or picked as UTC ('2026-11-29T13:00', '… 13:00:05', ISO with an offset, or
    epoch milliseconds) -> epoch ms; None when it is none of those."""
    text = (text or "").strip()
    if re.fullmatch(r"\d{10,16}", text):
        return int(text) if len(text) > 10 else int(text) * 1000
    try:
        when = datetime.fromisoformat(text.replace(" UTC", "").replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


class PurgeForm(forms.Form):
    partition = forms.CharField(initial="all", max_length=12)
    mode = forms.ChoiceField(choices=PURGE_MODES, initial="offset", widget=forms.RadioSelect)
    offset = forms.IntegerField(required=False, min_value=0)
    timestamp = forms.CharField(required=False, max_length=64)

    def __init__(self, *args, partitions: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.partition_count = partitions

    def clean_partition(self) -> int | None:
        raw = self.cleaned_data["partition"].strip()
        if raw in ("", "all"):
            return None
        if not raw.isdigit() or int(raw) >= self.partition_count:
            raise forms.ValidationError(
                f"choose a partition between 0 and {self.partition_count - 1}, or all"
            )
        return int(raw)

    def clean(self):
        data = super().clean()
        mode = data.get("mode")
        if mode == "offset" and data.get("offset") is None and "offset" not in self.errors:
            self.add_error("offset", "enter the offset: records before it are deleted")
        if mode == "timestamp":
            when = parse_utc(data.get("timestamp", ""))
            if when is None:
                self.add_error(
                    "timestamp",
                    "enter a UTC time such as 2026-11-29 13:00:00, or epoch milliseconds",
                )
            data["timestamp_ms"] = when
        return data

    def purge_arguments(self) -> dict:
        """Keyword arguments for Cluster.purge (besides the topic)."""
        data = self.cleaned_data
        p = data["partition"]
        args: dict = {"partitions": None if p is None else [p]}
        if data["mode"] == "offset":
            args["before_offset"] = data["offset"]
        elif data["mode"] == "timestamp":
            args["before_timestamp_ms"] = data["timestamp_ms"]
        return args


@dataclasses.dataclass
class ConfigEdit:
    """What the config form asked for: keys to set, keys to reset, and per-key errors.

    Each key's input holds its override (empty: the default applies). Typing a value sets it;
    emptying an overridden key, or ticking its "reset", goes back to the default."""

    values: dict[str, str]
    set_: dict[str, str]
    delete: list[str]
    errors: dict[str, str]

    @property
    def changed(self) -> bool:
        return bool(self.set_ or self.delete)


def config_edit(description, data) -> ConfigEdit:
    resets = set(data.getlist("reset")) if hasattr(data, "getlist") else set()
    edit = ConfigEdit({}, {}, [], {})
    for key in description.config:
        raw = str(data.get(key, ""))[:1000]
        edit.values[key] = raw
        overridden = key in description.overrides
        text = raw.strip()
        if key in resets or not text:
            if overridden:
                edit.delete.append(key)
            continue
        value = parse_config_value(key, text)
        problem = engine_check(key, value)
        if problem:
            edit.errors[key] = problem
        elif not (overridden and value == description.overrides[key]):
            edit.set_[key] = value
    return edit
