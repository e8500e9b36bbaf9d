"""``python -m streams.capture`` writing to a secured cluster (SASL/SCRAM-SHA-512 over TLS,
Tidelog's listener with a certificate made here) through ``--command-config``: the change
events arrive, a clean stop confirms them, the password is in none of its output; a file
naming a secret that is not there is refused with exit status 2 and the reason."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.capture.helpers import (
    capture_command,
    execute,
    fold,
    read_topic,
    run_capture,
    slot_for,
    wait_for,
)
from tests.kafka_servers import REPO_ROOT
from tests.secured_cluster import PASSWORD, PASSWORD_ENV, SecuredListener


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with SecuredListener(tmp_path_factory.mktemp("secured-capture")) as server:
        yield server


def test_capture_through_sasl_ssl(pg_dsn, secured, tmp_path):
    execute(
        pg_dsn,
        "CREATE TABLE accounts (id int PRIMARY KEY, note text)",
        "INSERT INTO accounts VALUES (1, 'one'), (2, 'two')",
    )
    log_path = tmp_path / "capture.log"
    cmd = capture_command(
        pg_dsn, "accounts", secured.bootstrap, "--slot", slot_for(pg_dsn), "--snapshot",
        "--server", "sec", "--command-config", str(secured.client_properties),
    )  # fmt: skip
    with open(log_path, "ab") as log:
        process = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=log)
        try:
            execute(pg_dsn, "UPDATE accounts SET note = 'uno' WHERE id = 1")

            def state():
                return fold(read_topic(secured.bootstrap, "sec.public.accounts",
                                       config=secured.client_config))  # fmt: skip

            wait_for(lambda: state().get('{"id": 1}', {}).get("note") == "uno", "the update")
            assert {k: v["note"] for k, v in state().items()} == {
                '{"id": 1}': "uno",
                '{"id": 2}': "two",
            }
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(60)
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert "capture stopped" in output and PASSWORD not in output


def test_a_missing_secret_is_refused_with_the_reason(pg_dsn, secured, tmp_path, monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    done = run_capture(
        pg_dsn, "accounts", secured.bootstrap, "--command-config", str(secured.client_properties),
        env={k: v for k, v in os.environ.items() if k != PASSWORD_ENV},
    )  # fmt: skip
    assert done.returncode == 2
    assert f"the environment variable {PASSWORD_ENV} is not set" in done.stderr
    assert "line 4" in done.stderr
