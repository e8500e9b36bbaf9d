"""``python -m streams.jobs run``: bad arguments get a clear error and exit status 2, before
anything connects anywhere."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streams.jobs import Job
from streams.jobs.__main__ import load_job
from tests.kafka_servers import REPO_ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streams.jobs", "run", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.jobs.workload", "expected MODULE:JOB"),
        ("tests.jobs.no_such_module:job", "cannot import tests.jobs.no_such_module"),
        ("tests.jobs.workload:nothing", "has no 'nothing'"),
        ("tests.jobs.workload:SIZE_MS", "is a int, not a streams.jobs Job"),
    ],
)
def test_a_bad_job_spec_is_refused_with_a_reason(spec, message):
    done = run(spec, "--bootstrap", "127.0.0.1:1")
    assert done.returncode == 2
    assert message in done.stderr


def test_bad_settings_are_refused():
    done = run("tests.jobs.workload:windowed", "--bootstrap", "127.0.0.1:1", "-X", "novalue")
    assert done.returncode == 2
    assert "expected key=value" in done.stderr
    done = run("tests.jobs.workload:windowed", "--bootstrap", "x", "--processing-guarantee", "x")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


def test_a_job_or_a_function_returning_one():
    assert isinstance(load_job("tests.jobs.workload:windowed"), Job)


def test_a_command_config_that_cannot_connect_is_refused(tmp_path):
    missing = run(
        "tests.jobs.workload:windowed", "--bootstrap", "127.0.0.1:1",
        "--command-config", str(tmp_path / "nope.properties"),
    )  # fmt: skip
    assert missing.returncode == 2 and "No such file" in missing.stderr
    half = tmp_path / "half.properties"
    half.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n")
    done = run("tests.jobs.workload:windowed", "--bootstrap", "127.0.0.1:1",
               "--command-config", str(half))  # fmt: skip
    assert done.returncode == 2
    assert "SCRAM-SHA-256 needs a user and a password" in done.stderr
