"""JSON Schema compatibility: can every document the writer's schema accepts be read by the
reader's, i.e. does the reader accept it too?

The answer is *sound*: "compatible" is only said when it holds for every document (the
brute-force test draws random documents valid under the writer and validates them with
the reader, with ``jsonschema``). Where a reader's keyword cannot be compared in general
(``not``, ``if``/``then``/``else``, ``contains``, ``unevaluated*``, ``dependentSchemas``, a
``oneOf`` that differs from the writer's), the two schemas must agree on it exactly, or the
pair is called incompatible with that reason. A writer's keywords only narrow what it
writes, so one the checker does not follow is left out, which can only make it stricter.

The reasons are named after Confluent's JSON Schema differences (``TYPE_NARROWED``,
``REQUIRED_ATTRIBUTE_ADDED``, ``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``,
``ADDITIONAL_PROPERTIES_REMOVED``, ``MAX_LENGTH_DECREASED``, ``ENUM_ARRAY_NARROWED``, ...),
each with the JSON pointer of the reader's schema where it is found. Local ``$ref``\\ s
(``#/...``) are followed, recursive ones included; references to other subjects by their
reference name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})

#: Keywords that say nothing about which documents are valid
_ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$comment", "$anchor", "$dynamicAnchor", "$vocabulary", "title",
    "description", "default", "examples", "readOnly", "writeOnly", "deprecated", "format",
    "contentEncoding", "contentMediaType", "contentSchema", "definitions", "$defs",
})  # fmt: skip

#: Reader keywords compared only by equality with the writer's
_EXACT = ("not", "if", "then", "else", "contains", "minContains", "maxContains",
          "unevaluatedProperties", "unevaluatedItems", "dependentSchemas", "$dynamicRef",
          "$recursiveRef")  # fmt: skip

_OLD_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")


@dataclass
class _Side:
    root: Any
    refs: Mapping[str, Any]
    old_draft: bool  # $ref's siblings ignored (draft 7 and before)

    def resolve(self, ref: str) -> tuple[Any, _Side] | None:
        doc, side = self.root, self
        if not ref.startswith("#"):
            name, _, fragment = ref.partition("#")
            if name not in self.refs:
                return None
            doc = self.refs[name]
            side = _Side(doc, self.refs, _old(doc, self.old_draft))
            ref = "#" + fragment
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
                doc = doc[int(part)]
            elif isinstance(doc, dict) and part in doc:
                doc = doc[part]
            else:
                return None
        return doc, side


def _old(schema: Any, default: bool) -> bool:
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        return any(d in schema["$schema"] for d in _OLD_DRAFTS)
    return default


def _canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _has_ref(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "$ref" in schema or any(_has_ref(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_ref(v) for v in schema)
    return False


def _types(schema: dict) -> set[str]:
    """The JSON types a schema's ``type`` allows (all when it has none)."""
    t = schema.get("type")
    if t is None:
        return set(TYPES)
    return {t} if isinstance(t, str) else set(t)


def _allows(types: set[str], t: str) -> bool:
    return t in types or (t == "integer" and "number" in types)


@dataclass
class _Check:
    writer: _Side
    reader: _Side
    problems: list[str] = field(default_factory=list)
    _assumed: set[tuple[int, int]] = field(default_factory=set)

    def report(self, kind: str, what: str, path: str) -> None:
        line = f"{kind}: {what} (at {path or '#/'})"
        if line not in self.problems:
            self.problems.append(line)

    # -- entry --------------------------------------------------------------------------

    def subset(self, w: Any, r: Any, path: str, ws: _Side, rs: _Side) -> bool:
        """Whether every document valid under `w` is valid under `r`; reasons reported."""
        before = len(self.problems)
        self._subset(w, r, path, ws, rs)
        return len(self.problems) == before

    def quietly(self, w: Any, r: Any, path: str, ws: _Side, rs: _Side) -> bool:
        """`subset` without reporting (for choosing among alternatives)."""
        saved = self.problems
        self.problems = []
        try:
            return self.subset(w, r, path, ws, rs)
        finally:
            self.problems = saved

    def _subset(self, w: Any, r: Any, path: str, ws: _Side, rs: _Side) -> None:
        if r is True or r == {}:
            return
        if w is False:
            return
        if r is False:
            self.report("SCHEMA_CLOSED", "the reader accepts nothing here", path)
            return
        if w is True:
            w = {}
        if not isinstance(w, dict) or not isinstance(r, dict):
            return
        key = (id(w), id(r))
        if key in self._assumed:
            return  # a recursive schema: compared further up
        if not _has_ref(w) and not _has_ref(r) and _canonical(w) == _canonical(r):
            return  # the same schema (a $ref may mean another thing on each side)
        self._assumed.add(key)
        try:
            self._compare(w, r, path, ws, rs)
        finally:
            self._assumed.discard(key)

    # -- the writer's shape -------------------------------------------------------------

    def _compare(self, w: dict, r: dict, path: str, ws: _Side, rs: _Side) -> None:
        if "$ref" in w and isinstance(w["$ref"], str):
            found = ws.resolve(w["$ref"])
            if found is None:
                self.report("REFERENCE_UNRESOLVED", f"the writer's {w['$ref']} is not found", path)
                return
            target, side = found
            if ws.old_draft:  # siblings of $ref are ignored
                self._subset(target, r, path, side, rs)
                return
            rest = {k: v for k, v in w.items() if k != "$ref"}
            if self.quietly(target, r, path, side, rs):
                return
            if rest and self.quietly(rest, r, path, ws, rs):
                return
            self._subset(target, r, path, side, rs)  # report why
            return
        for word in ("anyOf", "oneOf"):  # a document is one of the branches (and the rest)
            if not isinstance(w.get(word), list):
                continue
            if word in r and _canonical(w[word]) == _canonical(r[word]):
                continue  # the same combination on both sides: the reader compares it
            rest = {k: v for k, v in w.items() if k != word}
            if rest and self.quietly(rest, r, path, ws, rs):
                return
            if all(self.quietly(b, r, path, ws, rs) for b in w[word]):
                return
            for i, b in enumerate(w[word]):
                self._subset(b, r, f"{path}/{word}/{i}", ws, rs)
            return
        if isinstance(w.get("allOf"), list):  # a document is every part: one part may do
            rest = {k: v for k, v in w.items() if k != "allOf"}
            parts = [rest, *w["allOf"]] if rest else list(w["allOf"])
            if any(self.quietly(p, r, path, ws, rs) for p in parts):
                return
        if "enum" in w or "const" in w:
            self._finite(w, r, path, rs)
            return
        self._reader(w, r, path, ws, rs)

    def _finite(self, w: dict, r: dict, path: str, rs: _Side) -> None:
        """A writer with ``enum``/``const``: each of its values must be valid for the reader."""
        import jsonschema

        values = [w["const"]] if "const" in w else list(w["enum"])
        if "const" in w and "enum" in w:
            values = [v for v in values if v in w["enum"]]
        validator = _validator(rs, jsonschema).evolve(schema=r)  # its $refs from the root
        for value in values:
            try:
                valid = validator.is_valid(value)
            except jsonschema.exceptions.SchemaError:
                valid = False
            except Exception:  # noqa: BLE001 - a reference jsonschema cannot resolve
                valid = False
            if not valid:
                self.report(
                    "ENUM_ARRAY_NARROWED",
                    f"the writer's value {json.dumps(value)} is not valid here",
                    path,
                )

    # -- the reader's keywords ----------------------------------------------------------

    def _reader(self, w: dict, r: dict, path: str, ws: _Side, rs: _Side) -> None:
        if "$ref" in r and isinstance(r["$ref"], str):
            found = rs.resolve(r["$ref"])
            if found is None:
                self.report("REFERENCE_UNRESOLVED", f"the reader's {r['$ref']} is not found", path)
                return
            target, side = found
            self._subset(w, target, path, ws, side)
            if rs.old_draft:
                return
            r = {k: v for k, v in r.items() if k != "$ref"}
        if isinstance(r.get("allOf"), list):
            for i, part in enumerate(r["allOf"]):
                self._subset(w, part, f"{path}/allOf/{i}", ws, rs)
            r = {k: v for k, v in r.items() if k != "allOf"}
        if isinstance(r.get("anyOf"), list):
            if not any(self.quietly(w, b, path, ws, rs) for b in r["anyOf"]):
                same = isinstance(w.get("anyOf"), list) and len(w["anyOf"]) <= len(r["anyOf"])
                if not same or not all(
                    any(self.quietly(wb, rb, path, ws, rs) for rb in r["anyOf"])
                    for wb in w["anyOf"]
                ):
                    self.report(
                        "SUM_TYPE_NARROWED",
                        "no branch of the reader's anyOf takes the writer's documents",
                        f"{path}/anyOf",
                    )
            r = {k: v for k, v in r.items() if k != "anyOf"}
        if "oneOf" in r:
            if _canonical(w.get("oneOf")) != _canonical(r["oneOf"]) or _has_ref(r["oneOf"]):
                self.report(
                    "COMBINED_TYPE_CHANGED",
                    "the reader's oneOf differs from the writer's",
                    f"{path}/oneOf",
                )
            r = {k: v for k, v in r.items() if k != "oneOf"}
        for word in _EXACT:
            if word in r and (_canonical(w.get(word)) != _canonical(r[word]) or _has_ref(r[word])):
                self.report(
                    "KEYWORD_NOT_COMPARED",
                    f"the reader's {word} differs from the "
                    "writer's (only the same one is known to accept the same)",
                    f"{path}/{word}",
                )
        if "enum" in r or "const" in r:
            self.report(
                "ENUM_ARRAY_NARROWED", "the reader allows listed values only, the writer any", path
            )
        w_types = _types(w)
        r_types = _types(r)
        lost = sorted(t for t in w_types if not _allows(r_types, t))
        if lost:
            narrowed = "number" in lost and "integer" in r_types and len(lost) == 1
            kind = "TYPE_NARROWED" if narrowed or r_types < w_types else "TYPE_CHANGED"
            self.report(
                kind,
                f"the writer's {', '.join(lost)} is not accepted "
                f"(the reader takes {', '.join(sorted(r_types))})",
                path,
            )
        kept = {t for t in w_types if _allows(r_types, t)}
        if kept & {"number", "integer"}:
            self._numbers(w, r, path, integer_only="number" not in kept)
        if "string" in kept:
            self._strings(w, r, path)
        if "array" in kept:
            self._arrays(w, r, path, ws, rs)
        if "object" in kept:
            self._objects(w, r, path, ws, rs)

    def _numbers(self, w: dict, r: dict, path: str, integer_only: bool) -> None:
        w_low, w_low_open = _bound(w, "minimum", "exclusiveMinimum", low=True)
        r_low, r_low_open = _bound(r, "minimum", "exclusiveMinimum", low=True)
        if r_low is not None and not _tighter(w_low, w_low_open, r_low, r_low_open, low=True):
            kind = "MINIMUM_ADDED" if w_low is None else "MINIMUM_INCREASED"
            self.report(
                kind,
                f"the reader's minimum {r_low} is above the writer's "
                f"{'none' if w_low is None else w_low}",
                path,
            )
        w_high, w_high_open = _bound(w, "maximum", "exclusiveMaximum", low=False)
        r_high, r_high_open = _bound(r, "maximum", "exclusiveMaximum", low=False)
        if r_high is not None and not _tighter(w_high, w_high_open, r_high, r_high_open, low=False):
            kind = "MAXIMUM_ADDED" if w_high is None else "MAXIMUM_DECREASED"
            self.report(
                kind,
                f"the reader's maximum {r_high} is below the writer's "
                f"{'none' if w_high is None else w_high}",
                path,
            )
        r_multiple = r.get("multipleOf")
        if isinstance(r_multiple, int | float) and not (integer_only and r_multiple == 1):
            w_multiple = w.get("multipleOf")
            ratio = w_multiple / r_multiple if isinstance(w_multiple, int | float) else None
            if ratio is None or not math.isclose(ratio, round(ratio)) or round(ratio) < 1:
                kind = "MULTIPLE_OF_ADDED" if w_multiple is None else "MULTIPLE_OF_CHANGED"
                self.report(
                    kind,
                    f"the reader's multipleOf {r_multiple} does not divide the "
                    f"writer's {w_multiple}",
                    path,
                )

    def _strings(self, w: dict, r: dict, path: str) -> None:
        self._at_least(w, r, "minLength", "MIN_LENGTH", path)
        self._at_most(w, r, "maxLength", "MAX_LENGTH", path)
        if "pattern" in r and w.get("pattern") != r["pattern"]:
            kind = "PATTERN_ADDED" if "pattern" not in w else "PATTERN_CHANGED"
            self.report(kind, f"the reader's pattern {r['pattern']!r} is not the writer's", path)

    def _at_least(self, w: dict, r: dict, word: str, kind: str, path: str) -> None:
        if isinstance(r.get(word), int | float) and r[word] > 0:
            if not isinstance(w.get(word), int | float) or w[word] < r[word]:
                suffix = "ADDED" if word not in w else "INCREASED"
                self.report(
                    f"{kind}_{suffix}",
                    f"the reader's {word} {r[word]} is above the writer's {w.get(word, 'none')}",
                    path,
                )

    def _at_most(self, w: dict, r: dict, word: str, kind: str, path: str) -> None:
        if isinstance(r.get(word), int | float):
            if not isinstance(w.get(word), int | float) or w[word] > r[word]:
                suffix = "ADDED" if word not in w else "DECREASED"
                self.report(
                    f"{kind}_{suffix}",
                    f"the reader's {word} {r[word]} is below the writer's {w.get(word, 'none')}",
                    path,
                )

    def _arrays(self, w: dict, r: dict, path: str, ws: _Side, rs: _Side) -> None:
        self._at_least(w, r, "minItems", "MIN_ITEMS", path)
        self._at_most(w, r, "maxItems", "MAX_ITEMS", path)
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            self.report("UNIQUE_ITEMS_ADDED", "the reader wants unique items", path)
        w_prefix, w_rest, w_rest_word = _items(w, ws)
        r_prefix, r_rest, r_rest_word = _items(r, rs)
        for i in range(max(len(w_prefix), len(r_prefix))):
            wi = w_prefix[i] if i < len(w_prefix) else w_rest
            ri = r_prefix[i] if i < len(r_prefix) else r_rest
            where = f"{path}/{'prefixItems' if not rs.old_draft else 'items'}/{i}"
            self._subset(wi, ri, where if i < len(r_prefix) else f"{path}/{r_rest_word}", ws, rs)
        if not self.quietly(w_rest, r_rest, path, ws, rs):
            if r_rest is False:
                self.report(
                    "ADDITIONAL_ITEMS_REMOVED",
                    "the reader takes no further items",
                    f"{path}/{r_rest_word}",
                )
            else:
                self._subset(w_rest, r_rest, f"{path}/{r_rest_word}", ws, rs)

    def _objects(self, w: dict, r: dict, path: str, ws: _Side, rs: _Side) -> None:
        self._at_least(w, r, "minProperties", "MIN_PROPERTIES", path)
        self._at_most(w, r, "maxProperties", "MAX_PROPERTIES", path)
        w_required = set(w.get("required", [])) if isinstance(w.get("required"), list) else set()
        for name in r.get("required", []) if isinstance(r.get("required"), list) else []:
            if name not in w_required:
                self.report(
                    "REQUIRED_ATTRIBUTE_ADDED",
                    f"{name!r} is required by the reader, optional for the writer",
                    f"{path}/required",
                )
        w_props = w.get("properties", {}) if isinstance(w.get("properties"), dict) else {}
        r_props = r.get("properties", {}) if isinstance(r.get("properties"), dict) else {}
        for name in sorted(set(w_props) | set(r_props)):
            w_schema = _schema_for(w, name)
            r_schema = _schema_for(r, name)
            where = f"{path}/properties/{name}"
            if self.quietly(w_schema, r_schema, where, ws, rs):
                continue
            if name not in w_props and name in r_props and _open(w, name):
                self.report(
                    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                    f"{name!r} is new to the reader; the writer may have written anything under it",
                    where,
                )
                continue
            if name in w_props and name not in r_props and r_schema is False:
                self.report(
                    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                    f"{name!r} is gone and the reader takes no other properties",
                    path,
                )
                continue
            self._subset(w_schema, r_schema, where, ws, rs)
        # names neither lists: the writer's patterns and additionalProperties against the
        # reader's (a pattern of each side may match the same name)
        w_patterns = (
            w.get("patternProperties", {}) if isinstance(w.get("patternProperties"), dict) else {}
        )
        r_patterns = (
            r.get("patternProperties", {}) if isinstance(r.get("patternProperties"), dict) else {}
        )
        w_other = w.get("additionalProperties", True)
        r_other = r.get("additionalProperties", True)
        for rp, r_schema in r_patterns.items():
            for w_schema in w_patterns.values():
                self._subset(w_schema, r_schema, f"{path}/patternProperties/{rp}", ws, rs)
            self._subset(w_other, r_schema, f"{path}/patternProperties/{rp}", ws, rs)
        for wp, w_schema in w_patterns.items():
            if wp not in r_patterns:
                self._subset(w_schema, r_other, f"{path}/additionalProperties", ws, rs)
        if not self.quietly(w_other, r_other, path, ws, rs):
            if r_other is False:
                self.report(
                    "ADDITIONAL_PROPERTIES_REMOVED",
                    "the reader takes no other properties, the writer writes them",
                    f"{path}/additionalProperties",
                )
            else:
                self.report(
                    "ADDITIONAL_PROPERTIES_NARROWED",
                    "the reader's additionalProperties takes less than the writer's",
                    f"{path}/additionalProperties",
                )
        if "propertyNames" in r:
            self._subset(
                w.get("propertyNames", True), r["propertyNames"], f"{path}/propertyNames", ws, rs
            )
        self._dependencies(w, r, path)

    def _dependencies(self, w: dict, r: dict, path: str) -> None:
        def lists(s: dict) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for word in ("dependencies", "dependentRequired"):
                if isinstance(s.get(word), dict):
                    out.update(s[word])
            return out

        w_deps, r_deps = lists(w), lists(r)
        for name, needs in r_deps.items():
            have = w_deps.get(name)
            if isinstance(needs, list):
                w_required = (
                    set(w.get("required", [])) if isinstance(w.get("required"), list) else set()
                )
                if not isinstance(have, list) or not set(needs) <= set(have) | w_required:
                    self.report(
                        "DEPENDENCY_ARRAY_EXTENDED",
                        f"with {name!r} the reader wants {', '.join(map(repr, needs))}",
                        f"{path}/dependencies/{name}",
                    )
            elif _canonical(have) != _canonical(needs):
                self.report(
                    "DEPENDENCY_SCHEMA_ADDED",
                    f"the reader's schema dependency on {name!r} is not the writer's",
                    f"{path}/dependencies/{name}",
                )


def _validator(side: _Side, jsonschema):
    cls = jsonschema.validators.validator_for(side.root)
    return cls(side.root)


def _bound(s: dict, inclusive: str, exclusive: str, *, low: bool) -> tuple[float | None, bool]:
    """A number's bound as (value, whether the value itself is excluded), or (None, False)."""
    best: tuple[float | None, bool] = (None, False)
    value = s.get(inclusive)
    if isinstance(value, int | float) and not isinstance(value, bool):
        best = (value, s.get(exclusive) is True)  # draft 4: exclusiveMinimum is a boolean
    other = s.get(exclusive)
    if isinstance(other, int | float) and not isinstance(other, bool):
        if best[0] is None or (other >= best[0] if low else other <= best[0]):
            best = (other, True)
    return best


def _tighter(w: float | None, w_open: bool, r: float, r_open: bool, *, low: bool) -> bool:
    """Whether the writer's bound lies within the reader's."""
    if w is None:
        return False
    if w == r:
        return w_open or not r_open
    return w > r if low else w < r


def _items(s: dict, side: _Side) -> tuple[list[Any], Any, str]:
    """An array schema's positional item schemas, the schema of the items after them, and
    the keyword of the latter."""
    if side.old_draft or isinstance(s.get("items"), list):
        items = s.get("items", True)
        if isinstance(items, list):
            return list(items), s.get("additionalItems", True), "additionalItems"
        return [], items, "items"
    prefix = s.get("prefixItems", [])
    return list(prefix) if isinstance(prefix, list) else [], s.get("items", True), "items"


def _schema_for(s: dict, name: str) -> Any:
    """The schema a property's value meets: its own, else a matching pattern's, else
    ``additionalProperties``."""
    props = s.get("properties")
    if isinstance(props, dict) and name in props:
        return props[name]
    patterns = s.get("patternProperties")
    if isinstance(patterns, dict):
        matching = [v for p, v in patterns.items() if _search(p, name)]
        if matching:
            return matching[0] if len(matching) == 1 else {"allOf": matching}
    return s.get("additionalProperties", True)


def _open(s: dict, name: str) -> bool:
    schema = _schema_for(s, name)
    return schema is True or schema == {}


def _search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return True  # an ECMA pattern Python cannot read: assume it may match


def jsonschema_incompatibilities(
    reader: Any,
    writer: Any,
    reader_refs: Mapping[str, Any] | None = None,
    writer_refs: Mapping[str, Any] | None = None,
) -> list[str]:
    """Why a document valid under `writer` may be invalid under `reader`, one line per reason
    as ``KIND: what (at #/json/pointer)``; [] when every writer-valid document is
    reader-valid. `*_refs` are the schemas each references, by reference name."""
    ws = _Side(writer, writer_refs or {}, _old(writer, False))
    rs = _Side(reader, reader_refs or {}, _old(reader, False))
    check = _Check(ws, rs)
    check.subset(writer, reader, "#", ws, rs)
    return check.problems
