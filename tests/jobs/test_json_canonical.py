"""The test "these JSON bytes are canonical" (``JSON.serialize(JSON.deserialize(b)) == b``):
the compiled one (``_crecords.json_canonical_bytes``, streams/jobs/_cjsoncanon.pxd) and its
pure reference (``serde.json_canonical``) give the same answer on any bytes, never say True
for bytes that are not canonical (or not JSON), and say True for plain values' serialisations,
so the fast path is taken."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs import serde
from streams.jobs.serde import JSON, json_canonical

REPO = Path(__file__).resolve().parents[2]
COMPILED = getattr(serde._crecords, "json_canonical_bytes", None)
needs_compiled = pytest.mark.skipif(
    COMPILED is None, reason="_crecords is not built with json_canonical_bytes: make native"
)


def test_the_compiled_test_is_built():
    assert COMPILED is not None, (
        "streams/jobs/_crecords.so is not built, or built before json_canonical_bytes: make native"
    )
    assert serde.canonical_json is COMPILED


def test_the_pure_test_is_used_when_the_module_is_not_built():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["streams.jobs._crecords"] = None  # as if it were not built
        from streams.jobs import serde
        assert serde._crecords is None
        assert serde.canonical_json is serde.json_canonical
        assert serde.canonical_json(b'{"a":[1,"x"]}') and not serde.canonical_json(b"1.0")
        """
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def answer(data: bytes) -> bool:
    """Both tests' answer, which must be the same; when True, `data` round-trip."""
    pure = json_canonical(data)
    if COMPILED is not None:
        assert COMPILED(data) is pure, data
    if pure:
        assert JSON.serialize(JSON.deserialize(data)) == data, data
    return pure


# ------------------------------------------------------------------ table


def nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def keys(n: int, repeat: int | None = None) -> bytes:
    names = [f"k{i}" for i in range(n)]
    if repeat is not None:
        names[-1] = names[repeat]
    return b"{" + b",".join(b'"%s":%d' % (k.encode(), i) for i, k in enumerate(names)) + b"}"


TABLE = [
    # scalars
    (b"0", True),
    (b"1", True),
    (b"-1", True),
    (b"42", True),
    (b"true", True),
    (b"false", True),
    (b"null", False),  # JSON.serialize(None) is None (a tombstone), not b"null"
    (b"[null]", True),
    (b'{"a":null}', True),
    (b'""', True),
    (b'"abc"', True),
    (b'"null"', True),
    (b'" ~!#$%&()*+/;<=>?@[]^_`{|}"', True),
    (b"[]", True),
    (b"{}", True),
    (b'[1,"a",true,false,null,[],{}]', True),
    (b'{"a":1,"b":{"c":[2,3]},"":0}', True),
    # empty and whitespace
    (b"", False),
    (b" ", False),
    (b" 1", False),
    (b"1 ", False),
    (b"1\n", False),
    (b"[1, 2]", False),
    (b"[ ]", False),
    (b"{ }", False),
    (b'{"a": 1}', False),
    (b'{"a" :1}', False),
    (b"[1\t]", False),
    (b"\xef\xbb\xbf1", False),  # a BOM
    # integers
    (b"-0", False),  # json.loads gives 0, written 0
    (b"-", False),
    (b"00", False),
    (b"01", False),
    (b"-01", False),
    (b"[01]", False),
    (b"+1", False),
    (b"123456789012345678", True),  # 18 digits
    (b"-123456789012345678", True),
    (b"999999999999999999", True),
    (b"1234567890123456789", False),  # 19 digits
    (b"-1234567890123456789", False),
    (b"[12345678901234567890]", False),
    # floats
    (b"1.0", False),
    (b"1.5", False),
    (b"0.5", False),
    (b"1e5", False),
    (b"1E5", False),
    (b"-1e-5", False),
    (b"[1.0]", False),
    (b"NaN", False),
    (b"Infinity", False),
    (b"-Infinity", False),
    (b"[NaN]", False),
    # strings
    (b'"\\n\\r\\t\\b\\f\\"\\\\"', True),
    (b'"\\/"', False),
    (b'"/"', True),
    (b'"\\u0041"', False),
    (b'"\\u00e9"', False),
    (b'"\\x41"', False),
    (b'"\\a"', False),
    (b'"\\', False),
    (b'"\\"', False),
    (b'"abc', False),
    (b'"a"b"', False),
    (b"'a'", False),
    (b'"\t"', False),  # a raw tab
    (b'"\n"', False),
    (b'"\x00"', False),
    (b'"\x1f"', False),
    (b'"\x7f"', False),  # json writes \u007f
    ('"é"'.encode(), False),  # json writes \u00e9
    (b'"\xff"', False),
    (b'"\xed\xa0\x80"', False),  # a UTF-8 encoded surrogate
    # words
    (b"True", False),
    (b"nul", False),
    (b"nulll", False),
    (b"truefalse", False),
    (b"[true,]", False),
    # structure
    (b"[", False),
    (b"]", False),
    (b"[1", False),
    (b"[1,", False),
    (b"[1,]", False),
    (b"[,1]", False),
    (b"[1,,2]", False),
    (b"[1]]", False),
    (b"[1}", False),
    (b'{"a":1]', False),
    (b"{", False),
    (b'{"a"}', False),
    (b'{"a":}', False),
    (b'{"a":1,}', False),
    (b'{"a",1}', False),
    (b"{1:2}", False),
    (b"{a:1}", False),
    (b'{"a":1"b":2}', False),
    (b"1,2", False),
    (b"[1][2]", False),
    (b"{}{}", False),
    (b'""""', False),
    (b"1x", False),
    (b"[1]\x00", False),
    # repeated keys (json.loads keeps the last value at the first key's place)
    (b'{"a":1,"a":2}', False),
    (b'{"a":1,"b":2,"a":3}', False),
    (b'{"a":{"a":1},"b":{"a":2}}', True),  # the same key in different objects
    (b'{"a":[{"a":1,"b":2}],"b":1}', True),
    (b'{"a":{"b":1,"c":2},"a":3}', False),
    (b'{"":1,"":2}', False),
    (b'{"\\n":1,"\\n":2}', False),
    (b'{"ab":1,"a":2,"abc":3}', True),  # prefixes are other keys
    (keys(32), True),
    (keys(33), False),
    (keys(32, repeat=0), False),
    (keys(32, repeat=30), False),
    (b"[" + keys(32) + b"," + keys(32) + b"]", True),
    (b'{"a":' + keys(32) + b',"b":2}', True),
    # nesting
    (nested(64, "array"), True),
    (nested(65, "array"), False),
    (nested(64, "object"), True),
    (nested(65, "object"), False),
    (b"[" * 64 + b"]" * 64, True),
    (b"[" * 65 + b"]" * 65, False),
    (b"[" * 100000, False),
    (b"[" * 64, False),
]


@pytest.mark.parametrize("data, expected", TABLE, ids=[f"{i}" for i in range(len(TABLE))])
def test_table(data, expected):
    assert json_canonical(data) is expected, data
    if COMPILED is not None:
        assert COMPILED(data) is expected, data
    if expected:
        assert JSON.serialize(JSON.deserialize(data)) == data


@needs_compiled
def test_only_bytes():
    with pytest.raises(TypeError):
        COMPILED(None)
    with pytest.raises(TypeError):
        COMPILED("1")


# ------------------------------------------------------------------ serialised values

# text with what json.dumps escapes or writes otherwise: quotes, backslashes, control
# characters, DEL, non-ASCII, astral characters and a lone surrogate
AWKWARD_TEXT = st.text(
    st.one_of(
        st.sampled_from('"\\/\x00\x08\x0c\n\r\t\x1f\x7f\x80é€😀\ud800 a1.e-'),
        st.characters(),
    ),
    max_size=8,
)
INTS = st.one_of(
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.sampled_from(
        [0, -1, 10**17, 10**18 - 1, 10**18, -(10**18 - 1), -(10**18), 2**63 - 1, 2**63]
        + [-(2**63), 2**64, 10**30, -(10**30)]
    ),
)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 1e16, 1e-7, 1e400, float("nan")]),
)
SCALARS = st.one_of(st.none(), st.booleans(), INTS, FLOATS, AWKWARD_TEXT)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(AWKWARD_TEXT, children, max_size=5)
    ),
    max_leaves=20,
)

PLAIN_TEXT = st.text(
    st.one_of(st.characters(min_codepoint=0x20, max_codepoint=0x7E), st.sampled_from("\n\r\t\b\f")),
    max_size=8,
)
PLAIN_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**18) + 1, 10**18 - 1), PLAIN_TEXT
)
PLAIN = st.recursive(
    PLAIN_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(PLAIN_TEXT, children, max_size=6)
    ),
    max_leaves=25,
).filter(lambda v: v is not None)


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_a_serialised_value_said_canonical_is(value):
    data = JSON.serialize(value)
    if data is not None:
        answer(data)


@settings(max_examples=200, deadline=None)
@given(PLAIN)
def test_a_plain_value_serialised_is_said_canonical(value):
    data = JSON.serialize(value)
    assert answer(data), data


@settings(max_examples=50, deadline=None)
@given(PLAIN_SCALARS.filter(lambda v: v is not None), st.integers(1, 64), st.booleans())
def test_deep_plain_values_are_said_canonical(leaf, depth, in_objects):
    value = leaf
    for _ in range(depth):
        value = {"k": value} if in_objects else [value]
    assert answer(JSON.serialize(value))


# ------------------------------------------------------------------ adversarial bytes

TOKENS = [
    b"[", b"]", b"{", b"}", b",", b":", b'"', b"\\", b'"a"', b'"b"', b"0", b"1", b"-",
    b"9" * 18, b"true", b"false", b"null", b" ", b"\t", b"\n", b".", b"e", b"E", b"+",
    b"-0", b"01", b"1.0", b"1e5", b"NaN", b"Infinity", b"\\/", b"\\u0041", b"\\n",
    "é".encode(), b"\xff", b"\x7f", b"\x00", b"\xef\xbb\xbf",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_arbitrary_bytes(data):
    answer(data)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=16).map(b"".join))
def test_strings_of_json_tokens(data):
    answer(data)


INSERTS = st.sampled_from(
    [b" ", b"\t", b"\n", b"\r", b"-0", b"00", b"0", b"1.0", b".5", b"e5", b"1e5", b"NaN"]
    + [b"Infinity", b"\\/", b"\\u0041", b"\\", b'"', b"\t", "é".encode(), b"\x80", b"\x7f"]
    + [b"\xef\xbb\xbf", b",", b":", b"[", b"]", b"{", b"}", b"1", b"null", b'"a":1,']
)


@settings(max_examples=150, deadline=None)
@given(
    PLAIN,
    st.integers(0, 10**6),
    st.sampled_from(["insert", "replace", "truncate", "trail", "bom", "drop"]),
    INSERTS,
)
def test_mutated_serialisations(value, at, how, piece):
    data = JSON.serialize(value)
    k = at % (len(data) + 1)
    if how == "insert":
        data = data[:k] + piece + data[k:]
    elif how == "replace":
        data = data[:k] + piece + data[k + len(piece) :]
    elif how == "truncate":
        data = data[:k]
    elif how == "trail":
        data = data + piece
    elif how == "bom":
        data = b"\xef\xbb\xbf" + data
    else:
        data = data[:k] + data[k + 1 :]
    answer(data)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(PLAIN_TEXT, PLAIN_SCALARS), min_size=1, max_size=6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
def test_a_repeated_key_is_not_canonical(pairs, take, at):
    repeated = pairs[take % len(pairs)][0]
    pairs.insert(at % (len(pairs) + 1), (repeated, 0))
    items = [
        JSON.serialize(k) + b":" + (b"null" if v is None else JSON.serialize(v)) for k, v in pairs
    ]
    data = b"{" + b",".join(items) + b"}"
    assert not answer(data)
    assert not answer(b"[" + data + b"]")


@settings(max_examples=60, deadline=None)
@given(st.one_of(PLAIN, VALUES.filter(lambda v: v is not None)), st.one_of(PLAIN, st.none()))
def test_a_join_of_canonical_sides_is_written_by_concatenation(left, right):
    """What the runner relies on: the default joiner's ``[left, right]`` written as the
    serialised sides between ``[``, ``,`` and ``]`` (a missing side is ``null``)."""
    sides = [JSON.serialize(left), b"null" if right is None else JSON.serialize(right)]
    if all(s == b"null" or answer(s) for s in sides):
        values = [JSON.deserialize(s) for s in sides]
        assert JSON.serialize(values) == b"[" + sides[0] + b"," + sides[1] + b"]"
