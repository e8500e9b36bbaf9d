"""State stores: both backends behave as a mapping, report changes for the changelog once,
and restore from changelog records."""

from __future__ import annotations

import pytest

from streams.errors import InvalidConfig
from streams.jobs.state import MemoryBackend, RocksDictBackend, Store, changelog_topic


@pytest.fixture(params=["memory", "rocksdb"])
def backend(request, tmp_path):
    if request.param == "memory":
        return MemoryBackend()
    return RocksDictBackend(str(tmp_path / "rocks"))


def test_store_mapping_changes_and_restore(backend):
    s = Store("counts", backend)
    s["a"] = 1
    s[("k", 5)] = {"n": [1, 2]}
    assert s.get("a") == 1 and ("k", 5) in s and "zz" not in s
    changes = dict(s.take_changes())
    assert changes == {b'"a"': b"1", b'["k",5]': b'{"n":[1,2]}'}
    assert s.take_changes() == []  # nothing changed since
    v = s[("k", 5)]
    v["n"].append(3)  # mutated in place, as operators do: written back at the next commit
    del s["a"]
    assert dict(s.take_changes()) == {b'"a"': None, b'["k",5]': b'{"n":[1,2,3]}'}
    assert sorted(s.keys(), key=repr) == [("k", 5)]  # keys come back as tuples
    assert s.size() == 1
    assert list(s.scan()) == [(("k", 5), {"n": [1, 2, 3]})]
    with pytest.raises(InvalidConfig, match="cannot hold None"):
        s["b"] = None

    fresh = Store("counts", MemoryBackend())
    for k, val in [(b'"x"', b"1"), (b'"y"', b"2"), (b'"x"', None)]:
        fresh.restore(k, val)
    assert dict(fresh.items()) == {"y": 2}


def test_changelog_is_named_after_job_and_store():
    assert changelog_topic("revenue", "totals") == "revenue-totals-changelog"


def test_values_read_after_a_commit_are_the_committed_ones(backend):
    """The memory backend keeps committed values as objects (no JSON decoding on the next
    read); what a store answers after commits, deletions and restores is the same either way."""
    s = Store("rows", backend)
    s["a"], s["b"] = [1], {"x": 1}
    s.take_changes()
    assert s.get("a") == [1] and s["b"] == {"x": 1} and "a" in s
    assert s.get("missing") is None and s.get("missing", 7) == 7 and "missing" not in s
    s.get("a").append(2)  # mutated in place after a get: written back at the next commit
    del s["b"]
    assert s.get("b", "gone") == "gone" and "b" not in s
    assert dict(s.take_changes()) == {b'"a"': b"[1,2]", b'"b"': None}
    assert s.get("b") is None and "b" not in s and s["a"] == [1, 2]
    s.take_changes()
    s.restore(b'"a"', b"[9]")  # a changelog record replaces what the store had
    s.restore(b'"c"', b"3")
    assert s["a"] == [9] and s.get("c") == 3
    s.take_changes()
    s.restore(b'"a"', None)
    assert "a" not in s and s.get("a") is None
    assert dict(s.items()) == {"c": 3}
