"""Filter expressions (CEL) in the browse engine: variables, case-insensitive matching, error
positions, records the expression cannot be evaluated on, and honest scan counts."""

from __future__ import annotations

import json

import pytest

from streams.cluster import BrowseRequest, LocalCluster
from streams.cluster.expressions import CelLanguage, ExpressionError
from streams.groups import GroupCoordinator
from streams.log import LogStore

CEL = CelLanguage()
T0 = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC


@pytest.fixture
def cluster(tmp_path):
    store = LogStore.open(tmp_path, background=False)
    co = GroupCoordinator(store)
    co.load()
    store.create_topic("t", 2)
    for i in range(40):
        value = {"n": i, "name": "Ann" if i % 4 == 0 else "bob"}
        if i % 10 == 0:
            value = {"name": "no n here"}
        store.append(
            "t",
            json.dumps(value).encode() if i != 39 else b"\xff\xfe binary",
            key=b"k%d" % i,
            partition=i % 2,
            headers=(("src", b"web" if i % 3 else b"batch"),),
            timestamp_ms=T0 + i * 1000,
        )
    yield LocalCluster(store, co)
    store.close()


def keys(cluster, source, **kw):
    kw = {"seek": "oldest", "page_size": 100} | kw
    result = cluster.browse(BrowseRequest("t", expression=CEL.compile(source), **kw))
    return [r.key.decode() for r in result.records], result


def test_json_value_fields_key_headers_partition_offset_and_timestamp(cluster):
    assert keys(cluster, "value.n > 35")[0] == ["k36", "k37", "k38"]
    assert keys(cluster, 'key == "k7"')[0] == ["k7"]
    assert keys(cluster, 'headers.src == "batch" && value.n < 10')[0] == ["k3", "k6", "k9"]
    assert keys(cluster, "partition == 1 && offset < 2")[0] == ["k1", "k3"]
    late = 'timestamp >= timestamp("2026-01-01T00:00:37Z")'
    assert keys(cluster, late)[0] == ["k37", "k38", "k39"]
    assert keys(cluster, f"timestamp_ms == {T0 + 2000}")[0] == ["k2"]
    assert keys(cluster, "type(value) == bytes && value.size() > 3")[0] == ["k39"]


def test_case_insensitive_matching(cluster):
    found, _ = keys(cluster, 'has(value.n) && value.name.lowerAscii().contains("ANN".lowerAscii())')
    assert found == ["k4", "k8", "k12", "k16", "k24", "k28", "k32", "k36"]
    assert keys(cluster, 'has(value.n) && value.name.matches("(?i)^ANN$")')[0] == found


def test_records_the_expression_cannot_evaluate_do_not_match_and_are_counted(cluster):
    found, result = keys(cluster, "value.n >= 38")
    assert found == ["k38"]
    # k0, k10, k20, k30 have no "n"; k39's value is bytes
    assert result.eval_errors == 5
    assert result.eval_error == "partition 0 offset 0: no field 'n'"


@pytest.mark.parametrize(
    "source, column, message",
    [
        ("value.n > ", 11, "mismatched input '<EOF>'"),
        ("value.n >> 3", 10, "extraneous input '>'"),
        ('key == "x" && (offset > 3', 26, "missing ')'"),
        ("value.n > 3 && valu.n < 5", 16, "unknown variable “valu”"),
        ("size(key) > 0 &&\n  vale.x", 3, "unknown variable “vale”"),
    ],
)
def test_syntax_errors_say_which_character(source, column, message):
    with pytest.raises(ExpressionError) as err:
        CEL.compile(source)
    e = err.value
    assert message in e.message
    assert e.column == column
    assert e.caret_indent + "^" == " " * (column - 1) + "^"
    assert e.source_line == source.split("\n")[e.line - 1]


def test_comprehension_variables_are_not_unknown(cluster):
    assert keys(cluster, 'headers.exists(h, h == "src") && key == "k1"')[0] == ["k1"]


def test_an_unknown_function_is_an_error_in_the_expression_with_its_position(cluster):
    with pytest.raises(ExpressionError) as err:
        keys(cluster, "value.n > 3 && nosuch(key)")
    assert err.value.column == 16 and "nosuch" in err.value.message


def test_a_result_that_is_not_true_or_false_is_refused(cluster):
    with pytest.raises(ExpressionError, match="true or false"):
        keys(cluster, "offset + 1")


def test_the_scan_says_how_many_of_how_many_it_examined(cluster):
    found, result = keys(cluster, 'key == "k39"', max_scan_records=1)
    # the first budget check comes after one record; each partition read 20 ahead
    assert found == [] and not result.complete and result.in_range == 40
    assert result.stopped == "scan limit of 1 records"
    found, result = keys(cluster, 'key == "k39"')
    assert found == ["k39"] and result.complete and result.scanned_records == 40


def test_namespaced_extensions_work_and_lists_range_is_refused(cluster):
    assert keys(cluster, "has(value.n) && math.greatest([value.n, 37]) == 38")[0] == ["k38"]
    assert keys(cluster, 'base64.encode(bytes(key)) == "azE="')[0] == ["k1"]  # "k1"
    with pytest.raises(ExpressionError, match="unknown variable “lists”") as err:
        CEL.compile("lists.range(100000000).size() > 0")  # would fill memory
    assert err.value.column == 1


def test_a_comprehension_inside_another_is_refused_where_it_starts(cluster):
    source = 'headers.exists(h, [h].exists(x, x == "src"))'
    with pytest.raises(ExpressionError, match="inside another") as err:
        CEL.compile(source)
    assert source[err.value.column - 1 :].startswith("exists(x")
    # one after the other is fine, as is the word in a string
    found, _ = keys(
        cluster, 'headers.exists(h, h == "src") && [1].all(x, x > 0) && key != ".map(a, b.all("'
    )
    assert len(found) == 40
