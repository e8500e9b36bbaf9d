"""The ``Cluster`` Protocol holds both implementations to one interface: mypy (``make lint``)
passes on the tree, and fails as soon as a method of ``LocalCluster`` or ``KafkaCluster`` drifts
from the Protocol. The drift is made on a copy of the real module (its ``TYPE_CHECKING``
conformance block included), checked with the project's mypy settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api as mypy_api

REPO = Path(__file__).resolve().parents[2]


def mypy(*args: str) -> tuple[int, str]:
    out, err, status = mypy_api.run(["--config-file", str(REPO / "pyproject.toml"), *args])
    return status, out + err


def test_the_tree_type_checks(monkeypatch):
    monkeypatch.chdir(REPO)
    status, out = mypy()
    assert status == 0, out


DRIFTS = {
    # a keyword renamed in KafkaCluster.purge
    "kafka-keyword": (
        "streams/cluster/kafka.py",
        "        before_offset: int | None = None,\n        before_timestamp_ms",
        "        before: int | None = None,\n        before_timestamp_ms",
    ),
    # a required parameter added to LocalCluster.describe_group
    "local-parameter": (
        "streams/cluster/__init__.py",
        "    def describe_group(self, group_id: str) -> GroupDetail:\n        desc = self.",
        "    def describe_group(self, group_id: str, lag: bool) -> GroupDetail:\n"
        "        desc = self.",
    ),
    # another return type in KafkaCluster.partition_offsets
    "kafka-return": (
        "streams/cluster/kafka.py",
        "    def partition_offsets(self, *, topic: str) -> list[tuple[int, int]]:",
        "    def partition_offsets(self, *, topic: str) -> dict[int, tuple[int, int]]:",
    ),
    # a method of the Protocol missing from LocalCluster
    "local-missing": (
        "streams/cluster/__init__.py",
        "    def is_internal(self, topic: str) -> bool:\n        return is_internal(topic)",
        "    def is_internal_topic(self, topic: str) -> bool:\n        return is_internal(topic)",
    ),
}


@pytest.mark.parametrize("drift", DRIFTS)
def test_a_drifted_signature_fails_the_check(drift, tmp_path, monkeypatch):
    path, old, new = DRIFTS[drift]
    source = (REPO / path).read_text()
    assert source.count(old) == 1, f"{path} no longer has the text this test changes"
    copy = tmp_path / f"drifted_{drift.replace('-', '_')}.py"
    copy.write_text(source.replace(old, new))
    monkeypatch.chdir(REPO)  # the copy imports streams.* from the tree
    status, out = mypy("--follow-imports", "silent", str(copy))
    assert status == 1, out
    assert re.search(r'Incompatible return value type \(got "(Local|Kafka)Cluster", expected '
                     r'"Cluster"\)', out), out  # fmt: skip
