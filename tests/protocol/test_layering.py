"""Requirement (issue 12, item 5): the Kafka protocol layer uses the log only through its public
facade: it imports from ``streams.log`` only what ``streams.log`` exports (``LogStore`` and the
types in its ``__all__``), never a submodule (``records``, ``partition``, ``producer_state``,
``produce``, ...), and never reaches for a partition's internals through
``LogStore.partition_log``. Checked on the source, so a new import of log internals fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import streams.log

PROTOCOL_DIR = Path(__file__).resolve().parents[2] / "streams" / "protocol"


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(PROTOCOL_DIR.parent.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("streams.log"):
                    out.append(f"{where}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streams.log"):
            if node.module != "streams.log":
                out.append(f"{where}: from {node.module} import ...")
                continue
            for alias in node.names:
                if alias.name not in streams.log.__all__:
                    out.append(f"{where}: from streams.log import {alias.name} (not exported)")
        elif isinstance(node, ast.Attribute) and node.attr == "partition_log":
            out.append(f"{where}: .partition_log (a partition's internals)")
    return out


def test_the_protocol_layer_uses_only_the_log_facade():
    files = sorted(PROTOCOL_DIR.rglob("*.py"))
    assert len(files) > 10  # the walk found the package
    found = [v for f in files for v in _violations(f)]
    assert found == []


def test_the_facade_exports_what_it_names():
    for name in streams.log.__all__:
        assert hasattr(streams.log, name), name
