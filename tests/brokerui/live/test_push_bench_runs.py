"""`make bench BENCH=push` at a tiny size, so it cannot silently break again (it did: once the
console had its own authentication backend, the benchmark's session named Django's default
one, every socket was refused with HTTP 403 and nobody saw the figure for a month). One run on
the in-memory channel layer: 20 logged-in WebSocket clients on Daphne, records appended for 2 s;
the clients must each receive windows holding the appended records, and a live tail beside them
rows of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.kafka_servers import REPO_ROOT


def test_the_push_benchmark_runs(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TIDELOG_REGISTRY": "0"}
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_push", "--run", "memory", "--seconds", "2",
         "--scratch", str(tmp_path)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["layer"] == "InMemoryChannelLayer"
    assert result["windows"] >= 1  # each client got closed windows of the bench topic
    assert result["seen"] > 0.9  # and the end offsets of (nearly) every append
    assert result["produce_quiet"] > 0 and result["produce_loaded"] > 0
    # the alternating produce phases: none, 20 dashboards, none, …, each of them measured
    assert len(result["produce_phases"]) == 7 and min(result["produce_phases"]) > 0
    assert result["rate"] > 1000
    assert 0 < result["p50"] <= result["p99"]
    assert 0 < result["tail_p50"] <= result["tail_p99"]  # the live tail fetched rows too
    assert result["tail_fetches_per_s"] > 0
