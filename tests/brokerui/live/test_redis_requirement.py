"""The redis channel-layer test's requirement: skipped without redis-server on a developer's
machine, a failure under CI (where `make test` installs it), never a silent skip there."""

from __future__ import annotations

import shutil

import pytest

from tests.brokerui.live.conftest import require_redis_server


@pytest.fixture
def no_redis_server(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name, *a, **k: None if name == "redis-server" else real_which(name)
    )


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_missing_redis_server_fails(no_redis_server, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="redis-server is missing"):
        require_redis_server()


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_missing_redis_server_skips(no_redis_server, monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception):
        require_redis_server()


@pytest.mark.parametrize("program", ["no-such-program-xyz", "/usr/bin/no-such-program-xyz"])
def test_the_rule_holds_for_any_program_name_or_path(monkeypatch, program):
    from tests.system_programs import require_program

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="make test"):
        require_program(program)
    monkeypatch.setenv("CI", "0")
    with pytest.raises(pytest.skip.Exception):
        require_program(program)
    assert require_program("sh")  # present: its path
