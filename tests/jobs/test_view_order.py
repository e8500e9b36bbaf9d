"""``views.order``, the sort key of a view's keys, is flat (its tuples compare scalar by
scalar) and orders keys as the structural order it replaced does: numbers < strings <
lists/tuples element-wise, None first; and a windowed view's unbounded range bounds of one key
take exactly that key's windows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs.views import order

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from(["", "a", "b", "ab"]),
)
KEYS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=6)


def structural(key):
    """The nested definition: (rank, value), a tuple as (3, its elements' keys)."""
    if key is None:
        return (0,)
    if isinstance(key, bool):
        return (1, int(key))
    if isinstance(key, int | float):
        return (1, key)
    if isinstance(key, str):
        return (2, key)
    return (3, tuple(structural(k) for k in key))


@settings(max_examples=200, deadline=None)
@given(KEYS, KEYS)
def test_order_compares_keys_as_the_structural_order(a, b):
    assert (order(a) < order(b)) == (structural(a) < structural(b))
    assert (order(a) == order(b)) == (structural(a) == structural(b))


@settings(max_examples=100, deadline=None)
@given(KEYS, KEYS, st.integers(-5, 5))
def test_a_keys_window_range_holds_its_windows_only(k, other, start):
    lo, hi = (3, *order(k)), (3, *order(k), 9)
    assert lo <= order((k, start)) <= hi
    if structural(other) != structural(k):
        assert not lo <= order((other, start)) <= hi
