"""Protobuf compatibility: Confluent's rules change by change (each pair compiled by protoc,
compared writer -> reader), through imports, on a subject under BACKWARD and FORWARD, and a
brute-force check: random messages, readers made from them by random changes, random data
written with the writer's class and parsed with the reader's (google.protobuf). Whenever the
checker calls a pair compatible, no field the reader knows may arrive as an unknown field
(its wire type changed), a oneof of the reader may get at most one of the writer's fields,
and the reader's required fields are set."""

from __future__ import annotations

import random

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import unknown_fields as pb_unknown
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.schemas import errors as E
from streams.schemas.formats import FORMATS, PROTOBUF
from streams.schemas.registry import SchemaReference

P3 = 'syntax = "proto3";\n'
P2 = 'syntax = "proto2";\n'


def _parse(text: str, refs=None):
    return FORMATS[PROTOBUF].parse(text, refs or {})


def _problems(writer: str, reader: str, writer_refs=None, reader_refs=None) -> list[str]:
    return FORMATS[PROTOBUF].incompatibilities(
        _parse(reader, reader_refs), _parse(writer, writer_refs)
    )


def _kinds(problems: list[str]) -> set[str]:
    return {p.split(":", 1)[0] for p in problems}


# (what changes, writer, reader, the incompatibilities expected: kind and path)
CASES = [
    ("a field added", P3 + "message M { string a = 1; }",
     P3 + "message M { string a = 1; int32 b = 2; }", []),
    ("a field removed", P3 + "message M { string a = 1; int32 b = 2; }",
     P3 + "message M { string a = 1; }", []),
    ("a field renamed", P3 + "message M { int64 a = 1; }", P3 + "message M { int64 z = 1; }", []),
    ("a field renumbered: one removed, one added", P3 + "message M { string a = 1; }",
     P3 + "message M { string a = 2; }", []),
    ("the package changed",
     P3 + "package a.b;\nmessage M { M2 x = 1; }\nmessage M2 { int32 i = 1; }",
     P3 + "package c;\nmessage M { M2 x = 1; }\nmessage M2 { int32 i = 1; }", []),
    ("a type name qualified", P3 + "package p;\nmessage M { S s = 1; message S { int32 i = 1; } }",
     P3 + "package p;\nmessage M { .p.M.S s = 1; message S { int32 i = 1; } }", []),
    ("int32 -> int64, uint64, bool", P3 + "message M { int32 a = 1; int32 b = 2; int32 c = 3; }",
     P3 + "message M { int64 a = 1; uint64 b = 2; bool c = 3; }", []),
    ("string -> bytes", P3 + "message M { string a = 1; }", P3 + "message M { bytes a = 1; }", []),
    ("fixed32 -> sfixed32, sint32 -> sint64",
     P3 + "message M { fixed32 a = 1; sint32 b = 2; }",
     P3 + "message M { sfixed32 a = 1; sint64 b = 2; }", []),
    ("int32 -> an enum", P3 + "message M { int32 a = 1; }",
     P3 + "message M { E a = 1; }\nenum E { X = 0; Y = 1; }", []),
    ("an enum -> int32; its constants renamed", P3 + "message M { E a = 1; }\nenum E { X = 0; }",
     P3 + "message M { int32 a = 1; }", []),
    ("int32 -> string", P3 + "message M { int32 a = 1; }", P3 + "message M { string a = 1; }",
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("int32 -> sint32 (zigzag)", P3 + "message M { int32 a = 1; }",
     P3 + "message M { sint32 a = 1; }", [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("float -> double", P3 + "message M { float a = 1; }", P3 + "message M { double a = 1; }",
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("int32 -> a message", P3 + "message M { int32 a = 1; }",
     P3 + "message M { S a = 1; }\nmessage S { int32 i = 1; }", [("FIELD_KIND_CHANGED", "#/M/1")]),
    ("a message -> another message", P3 + "message M { S a = 1; }\nmessage S { int32 i = 1; }",
     P3 + "message M { T a = 1; }\nmessage T { int32 i = 1; }",
     [("MESSAGE_REMOVED", "#/S"), ("FIELD_NAMED_TYPE_CHANGED", "#/M/1")]),
    ("a nested message's field retyped",
     P3 + "message M { S a = 1; message S { int32 i = 1; } }",
     P3 + "message M { S a = 1; message S { double i = 1; } }",
     [("FIELD_SCALAR_KIND_CHANGED", "#/M/S/1"), ("FIELD_NAMED_TYPE_CHANGED", "#/M/1")]),
    ("a nested message removed", P3 + "message M { int32 a = 1; message S { int32 i = 1; } }",
     P3 + "message M { int32 a = 1; }", [("MESSAGE_REMOVED", "#/M/S")]),
    ("messages reordered, one added", P3 + "message A { int32 a = 1; }\nmessage B { int32 b = 1; }",
     P3 + "message C { int32 c = 1; }\nmessage B { int32 b = 1; }\nmessage A { int32 a = 1; }", []),
    ("map value retyped", P3 + "message M { map<string, int32> m = 1; }",
     P3 + "message M { map<string, string> n = 1; }", [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("map key retyped", P3 + "message M { map<int32, string> m = 1; }",
     P3 + "message M { map<string, string> m = 1; }", [("FIELD_SCALAR_KIND_CHANGED", "#/M/1")]),
    ("map -> repeated message", P3 + "message M { map<string, string> m = 1; }",
     P3 + "message M { repeated E m = 1; }\nmessage E { string key = 1; string value = 2; }",
     [("FIELD_KIND_CHANGED", "#/M/1")]),
    ("map renamed, value type name qualified",
     P3 + "message M { map<string, S> m = 1; message S { int32 i = 1; } }",
     P3 + "message M { map<string, M.S> renamed = 1; message S { int32 i = 1; } }", []),
    ("optional message -> repeated", P3 + "message M { S s = 1; }\nmessage S { int32 i = 1; }",
     P3 + "message M { repeated S s = 1; }\nmessage S { int32 i = 1; }", []),
    ("optional string -> repeated", P3 + "message M { optional string s = 1; }",
     P3 + "message M { repeated string s = 1; }", []),
    ("optional int32 -> repeated", P3 + "message M { optional int32 i = 1; }",
     P3 + "message M { repeated int32 i = 1; }", [("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")]),
    ("repeated double -> singular", P3 + "message M { repeated double d = 1; }",
     P3 + "message M { double d = 1; }", [("FIELD_NUMERIC_LABEL_CHANGED", "#/M/1")]),
    ("a required field added", P2 + "message M { optional string a = 1; }",
     P2 + "message M { optional string a = 1; required string b = 2; }",
     [("REQUIRED_FIELD_ADDED", "#/M/2")]),
    ("a required field removed", P2 + "message M { optional string a = 1; required string b = 2; }",
     P2 + "message M { optional string a = 1; }", [("REQUIRED_FIELD_REMOVED", "#/M/2")]),
    ("optional -> required", P2 + "message M { optional string a = 1; }",
     P2 + "message M { required string a = 1; }", [("REQUIRED_FIELD_ADDED", "#/M/1")]),
    ("one field into a new oneof", P3 + "message M { string a = 1; string b = 2; }",
     P3 + "message M { string a = 1; oneof o { string b = 2; int32 c = 3; } }", []),
    ("two fields into a new oneof", P3 + "message M { string a = 1; string b = 2; }",
     P3 + "message M { oneof o { string a = 1; string b = 2; int32 c = 3; } }",
     [("MULTIPLE_FIELDS_MOVED_TO_ONEOF", "#/M/o")]),
    ("a field into an existing oneof", P3 + "message M { string a = 1; oneof o { string b = 2; } }",
     P3 + "message M { oneof o { string a = 1; string b = 2; } }",
     [("FIELD_MOVED_TO_EXISTING_ONEOF", "#/M/o")]),
    ("a field added to a oneof", P3 + "message M { oneof o { string a = 1; string b = 2; } }",
     P3 + "message M { oneof o { string a = 1; string b = 2; int32 c = 3; } }", []),
    ("a field removed from a oneof", P3 + "message M { oneof o { string a = 1; int32 c = 3; } }",
     P3 + "message M { oneof o { string a = 1; } }", [("ONEOF_FIELD_REMOVED", "#/M/o/3")]),
    ("a oneof removed, its fields kept",
     P3 + "message M { oneof o { string a = 1; int32 c = 3; } }",
     P3 + "message M { string a = 1; int32 c = 3; }", []),
    ("proto3 optional is not a oneof", P3 + "message M { string a = 1; string b = 2; }",
     P3 + "message M { optional string a = 1; optional string b = 2; }", []),
    ("a recursive message's field retyped", P3 + "message N { N next = 1; int32 v = 2; }",
     P3 + "message N { N next = 1; string v = 2; }",
     [("FIELD_SCALAR_KIND_CHANGED", "#/N/2")]),  # once: N is being compared when next is
]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "writer", "reader", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_a_change(change, writer, reader, expected):
    problems = _problems(writer, reader)
    got = {(p.split(":", 1)[0], p.rsplit("(at ", 1)[1].rstrip(")")) for p in problems}
    assert got == set(expected), problems


def test_the_reasons_say_what_changed():
    [problem] = _problems(
        P3 + "message M { int32 count = 1; }", P3 + "message M { string count = 1; }"
    )
    assert problem == "FIELD_SCALAR_KIND_CHANGED: field count was int32, is string (at #/M/1)"


HOME = P3 + "package acme.{pkg};\nmessage Outer {{ message Home {{ {t} id = 1; bool on = 2; }} }}"
USES = P3 + 'import "{file}";\nmessage Use {{ .acme.{pkg}.Outer.Home home = 1; }}'


def _with_import(pkg: str, t: str, file: str):
    dep = _parse(HOME.format(pkg=pkg, t=t))
    return USES.format(pkg=pkg, file=file), {file: dep}


def test_imported_messages_are_compared_by_their_name_in_their_package():
    w, w_refs = _with_import("a", "int32", "home.proto")
    same, same_refs = _with_import("b", "int64", "home2.proto")  # another package and file
    assert _problems(w, same, w_refs, same_refs) == []
    broken, broken_refs = _with_import("b", "string", "home2.proto")
    kinds = _kinds(_problems(w, broken, w_refs, broken_refs))
    assert kinds == {"FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"}


def test_a_message_moved_into_an_import_is_removed_from_the_file():
    w = P3 + "message Use { Home home = 1; }\nmessage Home { int32 id = 1; }"
    refs = {"home.proto": _parse(P3 + "package a;\nmessage Home { int64 id = 1; }")}
    r = P3 + 'import "home.proto";\nmessage Use { .a.Home home = 1; }'
    assert _kinds(_problems(w, r, {}, refs)) == {"MESSAGE_REMOVED"}
    assert _problems(r, w, refs, {}) == []  # and out of it again: added


def test_a_subject_refuses_an_incompatible_protobuf_version(registry):
    v1 = P3 + "package shop;\nmessage Order { string id = 1; int64 cents = 2; }"
    v2 = P3 + "package shop;\nmessage Order { string id = 1; int64 cents = 2; string note = 3; }"
    bad = P3 + "package shop;\nmessage Order { string id = 1; double cents = 2; }"
    first = registry.register("orders-value", v1, PROTOBUF)
    assert registry.register("orders-value", v2, PROTOBUF).version == first.version + 1
    problems = registry.check_compatibility("orders-value", None, bad, PROTOBUF)
    assert len(problems) == 1 and "FIELD_SCALAR_KIND_CHANGED" in problems[0], problems
    with pytest.raises(E.IncompatibleSchema):
        registry.register("orders-value", bad, PROTOBUF)
    # FORWARD: the old schema must read the new one's data, so the differences run from the
    # new (writer) to the old (reader): dropping a field the old one requires adds a
    # required field, as the reader sees it
    registry.set_config("legacy-value", "FORWARD")
    old = P2 + "message L { required string id = 1; optional int32 n = 2; }"
    registry.register("legacy-value", old, PROTOBUF)
    dropped = P2 + "message L { optional int32 n = 2; }"
    assert "REQUIRED_FIELD_ADDED" in " ".join(
        registry.check_compatibility("legacy-value", None, dropped, PROTOBUF)
    )
    assert registry.check_compatibility("legacy-value", None, P2 + (
        "message L { required string id = 1; optional int32 n = 2; optional bytes b = 3; }"
    ), PROTOBUF) == []  # fmt: skip


def test_references_are_checked_through_the_registry(registry):
    registry.register("home.proto", HOME.format(pkg="a", t="int32"), PROTOBUF)
    registry.set_config("home.proto", "NONE")
    registry.register("home.proto", HOME.format(pkg="a", t="string"), PROTOBUF)
    uses = USES.format(pkg="a", file="home.proto")
    registry.register("use-value", uses, PROTOBUF, [SchemaReference("home.proto", "home.proto", 1)])
    problems = registry.check_compatibility(
        "use-value", None, uses, PROTOBUF, [SchemaReference("home.proto", "home.proto", 2)]
    )
    assert _kinds(problems) == {"FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"}


# -- the brute-force check --------------------------------------------------------------------

SCALARS = ["int32", "int64", "uint32", "uint64", "bool", "sint32", "sint64", "fixed32",
           "sfixed32", "fixed64", "sfixed64", "float", "double", "string", "bytes",
           "E"]  # fmt: skip


def _random_fields(rng: random.Random) -> list[dict]:
    fields = []
    for number in range(1, rng.randint(2, 6) + 1):
        t = rng.choice([*SCALARS, "S", "map"])
        label = rng.choice(["", "", "repeated ", "optional "]) if t != "map" else ""
        fields.append({"n": number, "t": t, "label": label, "oneof": None})
    if len(fields) > 2 and rng.random() < 0.4:
        for f in rng.sample(fields, 2):
            if f["t"] != "map":
                f["oneof"], f["label"] = "o", ""
    return fields


def _text(fields: list[dict]) -> str:
    def decl(f):
        t = "map<string, int32>" if f["t"] == "map" else f["t"]
        return f"{f['label']}{t} f{f['n']} = {f['n']};"

    plain = " ".join(decl(f) for f in fields if f["oneof"] is None)
    groups: dict[str, list[str]] = {}
    for f in fields:
        if f["oneof"]:
            groups.setdefault(f["oneof"], []).append(decl(f))
    oneofs = " ".join(f"oneof {name} {{ {' '.join(d)} }}" for name, d in groups.items())
    others = "message S { int32 a = 1; string b = 2; }\nenum E { E0 = 0; E1 = 1; E2 = 2; }"
    return P3 + f"message M {{ {plain} {oneofs} }}\n" + others


def _mutate(fields: list[dict], rng: random.Random) -> list[dict]:
    reader = [dict(f) for f in fields]
    for _ in range(rng.randint(1, 3)):
        change = rng.choice(["retype", "label", "remove", "add", "oneof", "unoneof"])
        f = rng.choice(reader)
        if change == "retype" and f["t"] != "map":
            f["t"] = rng.choice([*SCALARS, "S"])
        elif change == "label" and f["t"] != "map" and f["oneof"] is None:
            f["label"] = rng.choice(["", "repeated ", "optional "])
        elif change == "remove" and len(reader) > 1:
            reader.remove(f)
        elif change == "add":
            reader.append({"n": max(g["n"] for g in reader) + 1, "t": rng.choice(SCALARS),
                           "label": "", "oneof": None})  # fmt: skip
        elif change == "oneof" and f["t"] != "map":
            f["oneof"], f["label"] = rng.choice(["o", "p"]), ""
        elif change == "unoneof":
            f["oneof"] = None
    return reader


def _classes(text: str):
    file = _parse(text).obj
    pool = descriptor_pool.DescriptorPool()
    proto = descriptor_pb2.FileDescriptorProto()
    proto.CopyFrom(file)
    proto.name = "random.proto"
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("M"))


def _fill(msg, rng: random.Random) -> None:
    for fd in msg.DESCRIPTOR.fields:
        if rng.random() < 0.3:
            continue
        value = lambda fd=fd: _value(fd, rng)  # noqa: E731
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            for _ in range(rng.randint(1, 2)):
                getattr(msg, fd.name)[rng.choice("xyz")] = rng.randint(-5, 5)
        elif fd.message_type is not None:
            target = getattr(msg, fd.name)
            for _ in range(rng.randint(1, 2)) if _repeated(fd) else [0]:
                sub = target.add() if _repeated(fd) else target
                sub.a, sub.b = rng.randint(-9, 9), rng.choice(["", "x"])
                if not _repeated(fd):
                    sub.SetInParent()
        elif _repeated(fd):
            getattr(msg, fd.name).extend(value() for _ in range(rng.randint(1, 3)))
        else:
            setattr(msg, fd.name, value())


def _repeated(fd) -> bool:
    return bool(fd.is_repeated)


def _value(fd, rng: random.Random):
    t = fd.type
    if t in (fd.TYPE_STRING,):
        return rng.choice(["", "a", "héllo"])
    if t == fd.TYPE_BYTES:
        return bytes(rng.randrange(32, 127) for _ in range(rng.randint(0, 3)))
    if t == fd.TYPE_BOOL:
        return rng.random() < 0.5
    if t in (fd.TYPE_FLOAT, fd.TYPE_DOUBLE):
        return rng.choice([0.5, -2.0, 3.25])
    if t == fd.TYPE_ENUM:
        return rng.randint(0, 2)
    if t in (fd.TYPE_UINT32, fd.TYPE_UINT64, fd.TYPE_FIXED32, fd.TYPE_FIXED64):
        return rng.randint(0, 1000)
    return rng.randint(-1000, 1000)


def _losses(writer_msg, reader_cls) -> list[str]:
    """What the reader loses or cannot take of the writer's data (empty: it reads it all)."""
    reader_msg = reader_cls()
    try:
        reader_msg.MergeFromString(writer_msg.SerializeToString())
    except DecodeError as exc:
        return [f"does not parse: {exc}"]
    known = {fd.number: fd for fd in reader_msg.DESCRIPTOR.fields}
    lost = [
        f"field {u.field_number} arrived as an unknown field (wire type {u.wire_type})"
        for u in pb_unknown.UnknownFieldSet(reader_msg)
        if u.field_number in known
    ]
    written = {fd.number for fd, _ in writer_msg.ListFields()}
    for oneof in reader_msg.DESCRIPTOR.oneofs:
        if oneof.name.startswith("_"):
            continue  # proto3 optional's synthetic oneof
        together = sorted(written & {fd.number for fd in oneof.fields})
        if len(together) > 1:
            lost.append(f"oneof {oneof.name} given fields {together}")
    for fd, value in reader_msg.ListFields():  # a nested message read with the other's S
        if fd.message_type is not None and fd.message_type.name == "S":
            for sub in value if _repeated(fd) else [value]:
                if pb_unknown.UnknownFieldSet(sub):
                    lost.append(f"field {fd.number}'s message arrived with unknown fields")
    return lost


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_the_checker_agrees_with_reading_random_data(seed):
    rng = random.Random(seed)
    writer_fields = _random_fields(rng)
    reader_fields = _mutate(writer_fields, rng)
    writer, reader = _text(writer_fields), _text(reader_fields)
    problems = _problems(writer, reader)
    writer_cls, reader_cls = _classes(writer), _classes(reader)
    for _ in range(6):
        datum = writer_cls()
        _fill(datum, rng)
        lost = _losses(datum, reader_cls)
        if not problems:
            assert not lost, (writer, reader, lost)


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ("int32 f1 = 1;", "string f1 = 1;"),
        ("repeated int32 f1 = 1;", "int32 f1 = 1;"),
        ("int32 f1 = 1; int32 f2 = 2;", "oneof o { int32 f1 = 1; int32 f2 = 2; }"),
    ],
)
def test_the_brute_force_check_sees_what_the_checker_refuses(writer, reader):
    """The check above could fail: for pairs the checker refuses, reading loses data."""
    w = P3 + f"message M {{ {writer} }}"
    r = P3 + f"message M {{ {reader} }}"
    assert _problems(w, r)
    datum = _classes(w)()
    for fd in datum.DESCRIPTOR.fields:
        if _repeated(fd):
            getattr(datum, fd.name).extend([1, 2])
        else:
            setattr(datum, fd.name, 7)
    assert _losses(datum, _classes(r))
