"""Run the Node scripts of tests/protocol/node/ (KafkaJS, @platformatic/kafka) against a
listener: each takes the bootstrap address and a JSON object of options, logs to stderr and
prints one JSON line with what it saw.

Node comes from Debian (or NodeSource) and the clients from ``npm ci`` in tests/protocol/node,
both done by `make test`. Without them the tests are skipped with the command to run; under CI a
missing one fails them (see ``tests.system_programs``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.system_programs import require_program, under_ci

NODE_DIR = Path(__file__).parent / "node"


def require_node_modules(*packages: str) -> str:
    """The path of `node`, once `packages` are installed in tests/protocol/node/node_modules."""
    node = require_program("node")
    absent = [p for p in packages if not (NODE_DIR / "node_modules" / p / "package.json").exists()]
    if absent:
        message = f"Node packages {', '.join(absent)} are missing: run `make node-deps`"
        if under_ci():
            pytest.fail(message)
        pytest.skip(message)
    return node


def run_node(
    script: str, bootstrap: str, options: dict, *, packages: tuple[str, ...], timeout: float = 120
) -> dict:
    """Run tests/protocol/node/`script` and return its JSON result; fails the test with the
    script's stderr when it fails or outlives `timeout` seconds."""
    node = require_node_modules(*packages)
    try:
        proc = subprocess.run(
            [node, str(NODE_DIR / script), bootstrap, json.dumps(options)],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr or ""
        if isinstance(stderr, bytes):
            stderr = stderr.decode(errors="replace")
        pytest.fail(f"{script} still running after {timeout:.0f} s:\n{stderr[-4000:]}")
    if proc.returncode != 0:
        pytest.fail(f"{script} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
