"""Field masking: rules that hide a field of a topic's records from users who may not see it.

A rule names a topic pattern (as role bindings do: ``payments``, ``team-a.*``, ``*``), a field
path and an action. Paths start at the record's part: ``value.card.number``, ``key.customer``,
``headers.authorization``, or ``value`` / ``key`` alone for the whole part; a path walks
through objects by name and through lists element by element. ``mask`` replaces the field with
``"****"`` (the same for any value: nothing of its length or shape shows); ``hash`` with
``"hmac:<16 hex digits>"``, an HMAC-SHA-256 keyed with the console's secret key, so equal
values can still be matched by eye without an unkeyed hash a card number's small space would
reverse.

A masked part is rewritten as JSON (read first with the topic's decoder: a registered or mapped
schema, else as JSON). A part that cannot be read is masked whole: a rule never lets bytes it
could not look into through. `Masker` is what every path into records takes (the message
browser, the record page, exports, the JSON API, saved searches' matches); users with the
``access.unmask`` permission get none.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
from collections.abc import Iterable
from typing import Any, Protocol

import orjson

from brokerui.access.grants import BadBinding, check_pattern, matches

MASK, HASH = "mask", "hash"
ACTIONS = (MASK, HASH)
MASKED = "****"
_MASKED_JSON = b'"****"'
PARTS = ("key", "value", "headers")
_FIELD = re.compile(r"[A-Za-z0-9_\-$@]+")


class PartReader(Protocol):
    """A topic's key or value decoder (``streams.schemas.mapping.PartDecoder``)."""

    def handles(self, data: bytes | None) -> bool: ...

    def value(self, data: bytes) -> Any: ...


@dataclasses.dataclass(frozen=True)
class MaskRule:
    topic: str  # a pattern, as role bindings' (team-a.*)
    path: str  # value.card.number, headers.authorization, key
    action: str = MASK

    @property
    def part(self) -> str:
        return self.path.split(".", 1)[0]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.path.split(".")[1:])


def check_rule(topic: str, path: str, action: str) -> MaskRule:
    """A rule, checked (BadBinding with the reason)."""
    topic = check_pattern("topic", topic)
    path = path.strip()
    first, *rest = path.split(".")
    if first not in PARTS:
        raise BadBinding(f"a path starts with key, value or headers, not {first!r}")
    if first == "headers" and len(rest) != 1:
        raise BadBinding("a header path names one header: headers.authorization")
    for name in rest:
        if not _FIELD.fullmatch(name):
            raise BadBinding(f"{name!r} in {path!r} is not a field name")
    if action not in ACTIONS:
        raise BadBinding(f"action must be mask or hash, not {action!r}")
    return MaskRule(topic, path, action)


class Masker:
    """The rules that apply to one topic, for one user who may not see clear values."""

    def __init__(self, rules: Iterable[MaskRule], topic: str, key: bytes = b""):
        self.rules = [r for r in rules if matches(r.topic, topic)]
        self.topic = topic
        self._key = key
        self._by_part = {p: [r for r in self.rules if r.part == p] for p in PARTS}

    def __bool__(self) -> bool:
        return bool(self.rules)

    def masks(self, part: str) -> bool:
        return bool(self._by_part[part])

    def field_names(self) -> set[str]:
        """The masked fields' last names (a filter naming one is refused: it would tell the
        value by trying)."""
        return {r.path.split(".")[-1] for r in self.rules}

    def record(self, rec, key_reader: PartReader | None, value_reader: PartReader | None):
        """`rec` (a dataclass or NamedTuple with key, value and headers) with its masked fields
        replaced."""
        if not self.rules:
            return rec
        changes: dict[str, Any] = {}
        for part, reader in (("key", key_reader), ("value", value_reader)):
            rules = self._by_part[part]
            if rules:
                changes[part] = self._part(getattr(rec, part), reader, rules)
        headers = self._by_part["headers"]
        if headers:
            changes["headers"] = tuple(self._headers(rec.headers, headers))
        if dataclasses.is_dataclass(rec):
            return dataclasses.replace(rec, **changes)
        return rec._replace(**changes)

    def event(self, event: Any) -> Any:
        """A decoded value (a saved search's match) with the value's rules applied."""
        rules = self._by_part["value"]
        return self._apply(event, rules) if rules else event

    def _part(self, data: bytes | None, reader: PartReader | None, rules) -> bytes | None:
        if data is None:
            return None
        try:
            if reader is not None and reader.handles(data):
                obj = reader.value(data)
            else:
                obj = orjson.loads(data)
        except Exception:  # noqa: BLE001 - unreadable (any decoder's error): masked whole
            return _MASKED_JSON
        return orjson.dumps(self._apply(obj, rules), default=str)

    def _apply(self, obj: Any, rules) -> Any:
        for rule in rules:
            obj = self._at(obj, rule.fields, rule.action)
        return obj

    def _at(self, obj: Any, fields: tuple[str, ...], action: str) -> Any:
        if not fields:
            return self._hide(obj, action)
        if isinstance(obj, list):
            return [self._at(item, fields, action) for item in obj]
        if isinstance(obj, dict) and fields[0] in obj:
            return {**obj, fields[0]: self._at(obj[fields[0]], fields[1:], action)}
        return obj

    def _headers(self, headers, rules):
        names = {r.fields[0]: r.action for r in rules}
        for name, value in headers:
            action = names.get(name)
            if action is None or value is None:
                yield name, value
            else:
                yield name, self._hide(value.decode("utf-8", "replace"), action).encode()

    def _hide(self, value: Any, action: str) -> str:
        if action == HASH:
            canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)
            return "hmac:" + hmac.new(self._key, canonical, hashlib.sha256).hexdigest()[:16]
        return MASKED
