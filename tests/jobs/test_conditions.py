"""Compiled conditions (``streams.jobs.conditions``): ``field("type") == "search"``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.errors import InvalidConfig
from streams.jobs import SerdeError, field
from streams.jobs.conditions import Cond, compile_conds


def test_comparisons_on_a_field():
    e = {"type": "click", "price": 120, "user": {"plan": "pro"}}
    assert (field("type") == "click")(e)
    assert not (field("type") != "click")(e)
    assert (field("price") >= 100)(e) and (field("price") > 119)(e)
    assert not (field("price") < 120)(e) and (field("price") <= 120)(e)
    assert (field("type").isin(["click", "view"]))(e)
    assert not (field("type").isin({"order"}))(e)
    assert (field("user", "plan") == "pro")(e)


def test_and_or_not():
    c = (field("t") == "a") & ~(field("v") == 1) | (field("w") > 5)
    assert c({"t": "a", "v": 2})
    assert not c({"t": "a", "v": 1})
    assert c({"t": "b", "w": 6})
    assert not c({"t": "b", "w": 5})


def test_a_missing_field_reads_as_none_and_orders_as_false():
    """A missing field (or a value that is not a mapping) is None: == is false, != true, the
    ordering comparisons false (not a TypeError)."""
    for e in ({}, {"x": None}, "not a dict", [1, 2], None, {"user": "flat"}):
        assert not (field("x") == 1)(e)
        assert (field("x") != 1)(e)
        assert not (field("x") > 1)(e) and not (field("x") <= 1)(e)
        assert not (field("user", "plan") == "pro")(e)
    assert (field("x") == None)({})  # noqa: E711 - a condition, not a comparison


def test_constants_that_repr_would_not_give_back_are_kept_by_value():
    nan, big, tup = float("nan"), 10**30, (1, 2)
    assert not (field("x") == nan)({"x": nan})  # nan != nan, as in Python
    assert (field("x") == big)({"x": 10**30})
    assert (field("x") == tup)({"x": (1, 2)})
    values = ["a"]
    c = field("x").isin(values)
    values.append("b")
    assert not c({"x": "b"})  # kept at construction
    assert field("x").isin([[1], [2]])({"x": [2]})  # unhashable values: compared one by one


def test_python_and_or_in_are_refused_with_a_clear_error():
    with pytest.raises(TypeError, match="combine conditions with & | ~"):
        (field("t") == "a") and (field("v") == 1)  # noqa: B015
    with pytest.raises(TypeError, match=r"isin\(values\)"):
        field("t") == "a" in [1]  # noqa: B015 - chained: (field == "a") and ("a" in [1])
    with pytest.raises(TypeError, match="is not a condition"):
        if field("t"):
            pass
    with pytest.raises(TypeError, match="is not a condition"):
        (field("t") == "a") & "b"  # type: ignore[operator]
    with pytest.raises(InvalidConfig, match="list or set"):
        field("t").isin("abc")
    with pytest.raises(InvalidConfig, match="non-empty"):
        field("")


def test_field_still_extracts_a_timestamp_or_key():
    assert field("ts")({"ts": 5}) == 5
    assert field("a", "b")({"a": {"b": 7}}) == 7
    with pytest.raises(SerdeError, match="no field 'ts'"):
        field("ts")({"t": 1})


values = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["a", "b"]))
leaves = st.builds(
    lambda name, op, v: getattr(field(name), op)(v),
    st.sampled_from(["x", "y"]),
    st.sampled_from(["__eq__", "__ne__"]),
    values,
) | st.builds(
    lambda name, op, v: getattr(field(name), op)(v),
    st.sampled_from(["x", "y"]),
    st.sampled_from(["__lt__", "__le__", "__gt__", "__ge__"]),
    st.integers(-3, 3),
)
conds = st.recursive(
    leaves,
    lambda c: (
        st.builds(lambda a, b: a & b, c, c)
        | st.builds(lambda a, b: a | b, c, c)
        | st.builds(lambda a: ~a, c)
    ),
    max_leaves=6,
)


def reference(c: Cond, e: dict) -> bool:
    """The rules of the module docstring, written out."""
    from streams.jobs.conditions import _Bool, _Compare, _Not

    if isinstance(c, _Not):
        return not reference(c.part, e)
    if isinstance(c, _Bool):
        parts = [reference(p, e) for p in c.parts]
        return all(parts) if c.op == "and" else any(parts)
    assert isinstance(c, _Compare)
    v = e.get(c.path[0])
    if c.op in ("==", "!="):
        return (v == c.value) == (c.op == "==")
    if v is None:
        return False
    return {"<": v < c.value, "<=": v <= c.value, ">": v > c.value, ">=": v >= c.value}[c.op]


@given(
    conds, st.fixed_dictionaries({}, optional={"x": st.integers(-3, 3), "y": st.integers(-3, 3)})
)
def test_compiled_conditions_follow_the_rules(c, e):
    assert c(e) == compile_conds([c])[0](e) == reference(c, e)
