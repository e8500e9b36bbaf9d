"""Starting the server when something it needs is taken: one clear line and a non-zero exit,
not a traceback (the server started as `make run` starts it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[2]


def _run_server(tmp_path, **env) -> subprocess.CompletedProcess:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        http_port = probe.getsockname()[1]
    return subprocess.run(
        [
            sys.executable,
            "manage.py",
            "runserver",
            "--noreload",
            "--nostatic",
            f"127.0.0.1:{http_port}",
        ],
        cwd=REPO_DIR,
        env={**os.environ, "TIDELOG_DATA_DIR": str(tmp_path / "data"), "TIDELOG_DEMO": "0", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_taken_kafka_port_stops_the_server_with_one_clear_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run_server(tmp_path, TIDELOG_KAFKA_LISTENER="1", TIDELOG_KAFKA_PORT=str(port))
    assert done.returncode != 0
    assert f"tidelog: cannot start the Kafka listener on 127.0.0.1:{port}" in done.stderr
    assert "TIDELOG_KAFKA_LISTENER=0" in done.stderr
    assert "Traceback" not in done.stderr
