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
import functools
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable
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


class Maskable(Protocol):
    """A record as the browse paths hold it (``streams.cluster.browse.BrowsedRecord``)."""

    key: bytes | None
    value: bytes | None
    headers: tuple

    def with_parts(self, key: bytes | None, value: bytes | None, headers: tuple) -> Maskable: ...


class Masker:
    """The rules that apply to one topic, for one user who may not see clear values.

    Rules are grouped by part once; a masked part is parsed, walked in place (the parsed
    value is this call's own) and written back: a few microseconds a record."""

    def __init__(self, rules: Iterable[MaskRule], topic: str, key: bytes = b""):
        self.rules = [r for r in rules if matches(r.topic, topic)]
        self.topic = topic
        self._key = key
        self._by_part = {
            p: [self._walker(r.fields, r.action) for r in self.rules if r.part == p]
            for p in PARTS
            if p != "headers"
        }
        self._headers_masked = {r.fields[0]: r.action for r in self.rules if r.part == "headers"}

    def __bool__(self) -> bool:
        return bool(self.rules)

    def masks(self, part: str) -> bool:
        return bool(self._headers_masked) if part == "headers" else bool(self._by_part[part])

    def field_names(self) -> set[str]:
        """The masked fields' last names (a filter naming one is refused: it would tell the
        value by trying)."""
        return {r.path.split(".")[-1] for r in self.rules}

    def record(
        self, rec: Maskable, key_reader: PartReader | None, value_reader: PartReader | None
    ) -> Maskable:
        """`rec` with its masked fields replaced."""
        if not self.rules:
            return rec
        by_part = self._by_part
        key, value, headers = rec.key, rec.value, rec.headers
        if by_part["key"]:
            key = self._part(key, key_reader, by_part["key"])
        if by_part["value"]:
            value = self._part(value, value_reader, by_part["value"])
        if self._headers_masked:
            headers = tuple(self._headers(headers))
        return rec.with_parts(key, value, headers)

    def event(self, event: Any) -> Any:
        """A decoded value (a saved search's match, not changed) with the value's rules
        applied to a copy."""
        return self.decoded("value", event)

    def decoded(self, part: str, obj: Any) -> Any:
        """A decoded key or value (a saved search's match, a view's key or row; not changed)
        with `part`'s rules applied to a copy."""
        rules = self._by_part.get(part)
        if not rules:
            return obj
        return self._apply(orjson.loads(orjson.dumps(obj, default=str)), rules)

    def _part(self, data: bytes | None, reader: PartReader | None, rules) -> bytes | None:
        if data is None:
            return None
        try:
            if reader is not None and reader.handles(data):
                obj = reader.value(data)  # a new value each call: walked in place
            else:
                obj = orjson.loads(data)
        except Exception:  # noqa: BLE001 - unreadable (any decoder's error): masked whole
            return _MASKED_JSON
        return orjson.dumps(self._apply(obj, rules), default=str)

    def _apply(self, obj: Any, rules) -> Any:
        """`obj` with every rule's field hidden, changed in place (a whole part: replaced)."""
        for walk in rules:
            obj = walk(obj)
        return obj

    def _walker(self, fields: tuple[str, ...], action: str) -> Callable[[Any], Any]:
        """The function that hides `fields` of a value in place and returns the value: made
        once per rule, one call per level (a record's masking is a few microseconds)."""
        hide = functools.partial(self._hide, action=action)
        if not fields:
            return hide
        step = _level(fields[-1], None, hide)
        for name in reversed(fields[:-1]):
            step = _level(name, step, None)

        def walk(obj: Any) -> Any:
            step(obj)
            return obj

        return walk

    def _headers(self, headers):
        names = self._headers_masked
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


def _level(name: str, inner: Callable[[Any], None] | None, hide: Callable[[Any], Any] | None):
    """One level of a rule's path: in an object, field `name` is walked by `inner` (or, the
    last level, replaced by `hide`); a list is walked element by element at the same level."""

    def level(obj: Any) -> None:
        if type(obj) is dict:
            if name in obj:
                if hide is not None:
                    obj[name] = hide(obj[name])
                else:
                    inner(obj[name])  # type: ignore[misc]
        elif type(obj) is list:
            for item in obj:
                level(item)

    return level
