"""Protobuf compatibility: Confluent Schema Registry's rules, over ``FileDescriptorProto``\\ s.

Confluent compares an *original* schema with an *update* and lists the differences; some
kinds are incompatible. Data written with the writer must be readable with the reader, so
``original`` is the writer and ``update`` the reader (under BACKWARD the new schema reads
the old one's data: the old one is the writer).

What is compared, as Confluent's ``SchemaDiff`` does:

- messages by their name within the file's package (a changed package, a moved message and
  a differently qualified type name are not differences); nested messages recursively;
  a message the writer has that the reader lacks is ``MESSAGE_REMOVED``;
- a message's fields by number. Adding, removing and renaming a field is compatible,
  unless the field is ``required`` (``REQUIRED_FIELD_ADDED``, ``REQUIRED_FIELD_REMOVED``);
- a field's kind: scalar (enums count as scalars), message, map (``FIELD_KIND_CHANGED``);
  a scalar's wire-compatible group (int32/int64/uint32/uint64/bool/enum; sint32/sint64;
  string/bytes; fixed32/sfixed32; fixed64/sfixed64; float; double; otherwise
  ``FIELD_SCALAR_KIND_CHANGED``); a message's name (``FIELD_NAMED_TYPE_CHANGED``, also when
  the message of the same name, wherever it is imported from, is itself incompatible);
  a map's key and value alike;
- a field's label: repeated and singular are interchangeable for messages, strings and
  bytes, not for numbers (``FIELD_NUMERIC_LABEL_CHANGED``: packed encoding);
- oneofs: a member removed from a oneof both have (``ONEOF_FIELD_REMOVED``), and a oneof of
  the reader whose members the writer could set together: more than one field moved into a
  new oneof (``MULTIPLE_FIELDS_MOVED_TO_ONEOF``) or a field moved into an existing one
  (``FIELD_MOVED_TO_EXISTING_ONEOF``). Proto3 ``optional`` fields' synthetic oneofs are not
  oneofs.

Enums (constants added, removed, renamed), added and removed oneofs and messages added are
compatible and not reported. Confluent's ``confluent:reserved`` metadata rules are not
applied: Tidelog's registry does not keep schema metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor_pb2 import FieldDescriptorProto

_F = FieldDescriptorProto
_DOUBLE, _FLOAT, _INT64, _UINT64 = _F.TYPE_DOUBLE, _F.TYPE_FLOAT, _F.TYPE_INT64, _F.TYPE_UINT64
_INT32, _FIXED64, _FIXED32, _BOOL = _F.TYPE_INT32, _F.TYPE_FIXED64, _F.TYPE_FIXED32, _F.TYPE_BOOL
_STRING, _GROUP, _MESSAGE, _BYTES = _F.TYPE_STRING, _F.TYPE_GROUP, _F.TYPE_MESSAGE, _F.TYPE_BYTES
_UINT32, _ENUM, _SFIXED32, _SFIXED64 = (
    _F.TYPE_UINT32,
    _F.TYPE_ENUM,
    _F.TYPE_SFIXED32,
    _F.TYPE_SFIXED64,
)
_SINT32, _SINT64 = _F.TYPE_SINT32, _F.TYPE_SINT64
_REQUIRED, _REPEATED = _F.LABEL_REQUIRED, _F.LABEL_REPEATED
_TYPE_NAMES = {number: name[len("TYPE_") :].lower() for name, number in _F.Type.items()}

#: Scalars whose encodings read as each other's (Confluent's groups; protobuf's own guide)
_SCALAR_GROUP = {
    _INT32: "number", _INT64: "number", _UINT32: "number", _UINT64: "number",
    _BOOL: "number", _ENUM: "number",
    _SINT32: "signed", _SINT64: "signed",
    _STRING: "string_or_bytes", _BYTES: "string_or_bytes",
    _FIXED32: "fixed32", _SFIXED32: "fixed32",
    _FIXED64: "fixed64", _SFIXED64: "fixed64",
    _FLOAT: "float", _DOUBLE: "double",
}  # fmt: skip


@dataclass(frozen=True)
class _Message:
    proto: Any  # DescriptorProto
    package: str
    full_name: str  # without the leading dot

    @property
    def local_name(self) -> str:
        prefix = self.package + "." if self.package else ""
        inside = self.full_name.startswith(prefix)
        return self.full_name[len(prefix) :] if inside else self.full_name

    @property
    def is_map_entry(self) -> bool:
        return bool(self.proto.options.map_entry)


def _messages(files: Iterable[Any]) -> dict[str, _Message]:
    """Every message of `files` by its full name."""
    out: dict[str, _Message] = {}

    def walk(types, scope: str, package: str) -> None:
        for m in types:
            name = f"{scope}.{m.name}" if scope else m.name
            out[name] = _Message(m, package, name)
            walk(m.nested_type, name, package)

    for f in files:
        walk(f.message_type, f.package, f.package)
    return out


@dataclass
class _Diff:
    writer_types: dict[str, _Message]
    reader_types: dict[str, _Message]
    problems: list[str] = field(default_factory=list)
    _compared: dict[tuple[str, str], bool] = field(default_factory=dict)

    def report(self, kind: str, what: str, path: str) -> None:
        line = f"{kind}: {what} (at {path})"
        if line not in self.problems:
            self.problems.append(line)

    # -- messages ---------------------------------------------------------------------------

    def files(self, writer: Any, reader: Any) -> None:
        def top(file) -> dict[str, Any]:
            return {m.name: m for m in file.message_type}

        readers = top(reader)
        for name in top(writer):
            if name not in readers:
                self.report("MESSAGE_REMOVED", f"message {name} is gone", f"#/{name}")
                continue
            self.message(
                self._find(self.writer_types, writer.package, name),
                self._find(self.reader_types, reader.package, name),
            )

    @staticmethod
    def _find(types: dict[str, _Message], package: str, local: str) -> _Message:
        return types[f"{package}.{local}" if package else local]

    def message(self, w: _Message, r: _Message) -> bool:
        """Compare two messages of the same name; False when an incompatibility was found."""
        key = (w.full_name, r.full_name)
        if key in self._compared:
            return self._compared[key]  # in progress (a recursive type) or done
        self._compared[key] = True
        before = len(self.problems)
        path = "#/" + w.local_name.replace(".", "/")

        nested_r = {n.name: n for n in r.proto.nested_type if not n.options.map_entry}
        for n in w.proto.nested_type:
            if n.options.map_entry:
                continue  # a map field's entry: compared with the field
            if n.name not in nested_r:
                self.report("MESSAGE_REMOVED", f"message {w.local_name}.{n.name} is gone",
                            f"{path}/{n.name}")  # fmt: skip
                continue
            self.message(
                self.writer_types[f"{w.full_name}.{n.name}"],
                self.reader_types[f"{r.full_name}.{n.name}"],
            )

        w_fields = {f.number: f for f in w.proto.field}
        r_fields = {f.number: f for f in r.proto.field}
        for number, wf in w_fields.items():
            rf = r_fields.get(number)
            where = f"{path}/{number}"
            if rf is None:
                if wf.label == _REQUIRED:
                    self.report("REQUIRED_FIELD_REMOVED",
                                f"required field {wf.name} = {number} is gone", where)  # fmt: skip
                continue
            self.field(w, wf, r, rf, where)
        for number, rf in r_fields.items():
            was = w_fields.get(number)
            if rf.label == _REQUIRED and (was is None or was.label != _REQUIRED):
                what = f"field {rf.name} = {number} is required now"
                self.report("REQUIRED_FIELD_ADDED", what, f"{path}/{number}")

        self.oneofs(w.proto, r.proto, path)
        ok = len(self.problems) == before
        self._compared[key] = ok
        return ok

    # -- fields -----------------------------------------------------------------------------

    def _map_entry(self, types: dict[str, _Message], f) -> _Message | None:
        if f.type != _MESSAGE or f.label != _REPEATED:
            return None
        entry = types.get(f.type_name.lstrip("."))
        return entry if entry is not None and entry.is_map_entry else None

    def field(self, w: _Message, wf, r: _Message, rf, where: str) -> None:
        w_entry = self._map_entry(self.writer_types, wf)
        r_entry = self._map_entry(self.reader_types, rf)
        w_kind, r_kind = _kind(wf, w_entry), _kind(rf, r_entry)
        name = rf.name if rf.name == wf.name else f"{wf.name} (now {rf.name})"
        if w_kind != r_kind:
            self.report("FIELD_KIND_CHANGED",
                        f"field {name} was a {w_kind}, is a {r_kind}", where)  # fmt: skip
            return
        if w_entry is not None and r_entry is not None:
            wk, wv = _entry_fields(w_entry)
            rk, rv = _entry_fields(r_entry)
            self.value(wk, rk, name, where, "key of ")
            self.value(wv, rv, name, where, "value of ")
            return
        self.value(wf, rf, name, where, "")
        if w_kind == "scalar" or w_kind == "message":
            self.label(wf, rf, name, where)

    def value(self, wf, rf, name: str, where: str, part: str) -> None:
        """The type of a field (or of a map's key or value)."""
        if wf.type in (_MESSAGE, _GROUP) and rf.type in (_MESSAGE, _GROUP):
            if wf.type != rf.type:
                was, now = _TYPE_NAMES[wf.type], _TYPE_NAMES[rf.type]
                self.report(
                    "FIELD_KIND_CHANGED", f"{part}field {name} was a {was}, is a {now}", where
                )
                return
            wm = self.writer_types.get(wf.type_name.lstrip("."))
            rm = self.reader_types.get(rf.type_name.lstrip("."))
            w_name = wm.local_name if wm else wf.type_name.lstrip(".")
            r_name = rm.local_name if rm else rf.type_name.lstrip(".")
            if w_name != r_name:
                self.report("FIELD_NAMED_TYPE_CHANGED",
                            f"{part}field {name} was a {w_name}, is a {r_name}", where)  # fmt: skip
            elif wm is not None and rm is not None and not self.message(wm, rm):
                self.report("FIELD_NAMED_TYPE_CHANGED",
                            f"{part}field {name}: its {w_name} cannot be read", where)  # fmt: skip
            return
        if wf.type in (_MESSAGE, _GROUP) or rf.type in (_MESSAGE, _GROUP):
            self.report("FIELD_KIND_CHANGED", f"{part}field {name} was a "
                        f"{_describe(wf)}, is a {_describe(rf)}", where)  # fmt: skip
            return
        if _SCALAR_GROUP[wf.type] != _SCALAR_GROUP[rf.type]:
            self.report("FIELD_SCALAR_KIND_CHANGED", f"{part}field {name} was "
                        f"{_describe(wf)}, is {_describe(rf)}", where)  # fmt: skip

    def label(self, wf, rf, name: str, where: str) -> None:
        if (wf.label == _REPEATED) == (rf.label == _REPEATED):
            return
        if wf.type in (_STRING, _BYTES, _MESSAGE, _GROUP):
            return  # a singular field reads the last of repeated ones, and the other way round
        self.report("FIELD_NUMERIC_LABEL_CHANGED",
                    f"field {name} was {_label(wf)}, is {_label(rf)}", where)  # fmt: skip

    # -- oneofs -----------------------------------------------------------------------------

    def oneofs(self, w, r, path: str) -> None:
        w_groups = _oneof_members(w)
        r_groups = _oneof_members(r)
        r_numbers = {f.number for f in r.field}
        # where each of the writer's fields was: its oneof's name, or None at the top level
        placed: dict[int, str | None] = {f.number: None for f in w.field}
        for oneof, numbers in w_groups.items():
            for n in numbers:
                placed[n] = oneof
        for oneof, numbers in w_groups.items():
            if oneof not in r_groups:
                continue  # the whole oneof removed: its fields are compared one by one
            for n in sorted(numbers - r_groups[oneof]):
                if n not in r_numbers:
                    what = f"field {n} is gone from oneof {oneof}"
                    self.report("ONEOF_FIELD_REMOVED", what, f"{path}/{oneof}/{n}")
        for oneof, numbers in r_groups.items():
            known = sorted(n for n in numbers if n in placed)  # the fields the writer has
            if oneof in w_groups:
                moved = [n for n in known if placed[n] != oneof]
                if moved:
                    self.report("FIELD_MOVED_TO_EXISTING_ONEOF", f"fields {_numbers(moved)} "
                                f"moved into oneof {oneof}; the writer sets them beside it",
                                f"{path}/{oneof}")  # fmt: skip
                continue
            # fields the writer may set together: each top-level one alone, a oneof's as one
            together = {placed[n] if placed[n] is not None else f"#{n}" for n in known}
            if len(together) > 1:
                self.report("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"fields {_numbers(known)}, "
                            f"which the writer sets together, are in one oneof {oneof}",
                            f"{path}/{oneof}")  # fmt: skip


def _numbers(numbers: Sequence[int]) -> str:
    return ", ".join(str(n) for n in numbers)


def _oneof_members(m) -> dict[str, set[int]]:
    """A message's real oneofs (not proto3 ``optional``'s synthetic ones) and their fields."""
    out: dict[str, set[int]] = {}
    for f in m.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            out.setdefault(m.oneof_decl[f.oneof_index].name, set()).add(f.number)
    return out


def _kind(f, entry: _Message | None) -> str:
    if entry is not None:
        return "map"
    return "message" if f.type in (_MESSAGE, _GROUP) else "scalar"


def _entry_fields(entry: _Message):
    by_number = {f.number: f for f in entry.proto.field}
    return by_number[1], by_number[2]


def _describe(f) -> str:
    if f.type == _ENUM:
        return "enum " + f.type_name.lstrip(".")
    return _TYPE_NAMES.get(f.type, str(f.type))


def _label(f) -> str:
    return {_REPEATED: "repeated", _REQUIRED: "required"}.get(f.label, "singular")


def protobuf_incompatibilities(
    reader: Any,
    writer: Any,
    reader_deps: Sequence[Any] = (),
    writer_deps: Sequence[Any] = (),
) -> list[str]:
    """Why data written with the `writer` file cannot be read with the `reader` file, one line
    per incompatibility as ``KIND: what (at #/Message/field)``; [] when it can. The
    ``FileDescriptorProto``\\ s the two import are in `reader_deps` and `writer_deps`."""
    diff = _Diff(_messages([writer, *writer_deps]), _messages([reader, *reader_deps]))
    diff.files(writer, reader)
    return diff.problems
