"""Environment parsing and the generated secret key."""

from __future__ import annotations

import stat

import pytest

from brokerui.config import REPO_DIR, Config, ConfigError, load_or_create_secret_key


def test_defaults_are_safe():
    config = Config.from_env({})

    assert config.data_dir == REPO_DIR / "data"
    assert config.debug is False
    assert config.demo is True
    assert (config.http_port, config.kafka_port) == (8000, 9092)
    assert config.allowed_hosts[:2] == ("127.0.0.1", "localhost")
    assert config.database_url == f"sqlite:///{REPO_DIR / 'data' / 'tidelog.sqlite3'}"
    assert config.redis_url is None
    assert config.secret_key is None


def test_environment_overrides(tmp_path):
    config = Config.from_env(
        {
            "TIDELOG_DATA_DIR": str(tmp_path),
            "TIDELOG_DEBUG": "1",
            "TIDELOG_DEMO": "0",
            "TIDELOG_HTTP_PORT": "8081",
            "TIDELOG_KAFKA_PORT": "19092",
            "TIDELOG_ALLOWED_HOSTS": "tidelog.internal, other.host",
            "DATABASE_URL": "postgres://u:p@db/tidelog",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
        }
    )

    assert config.data_dir == tmp_path
    assert (config.debug, config.demo) == (True, False)
    assert (config.http_port, config.kafka_port) == (8081, 19092)
    assert config.allowed_hosts[-2:] == ("tidelog.internal", "other.host")
    assert config.database_url == "postgres://u:p@db/tidelog"
    assert config.redis_url == "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize(
    ("name", "value"),
    [("TIDELOG_HTTP_PORT", "http"), ("TIDELOG_HTTP_PORT", "70000"), ("TIDELOG_DEMO", "maybe")],
)
def test_bad_values_are_refused_with_the_variable_named(name, value):
    with pytest.raises(ConfigError, match=name):
        Config.from_env({name: value})


def test_secret_key_is_generated_once_with_owner_only_permissions(tmp_path):
    first = load_or_create_secret_key(tmp_path)
    second = load_or_create_secret_key(tmp_path)

    assert first == second
    assert len(first) >= 50
    assert stat.S_IMODE((tmp_path / ".secret_key").stat().st_mode) == 0o600
    assert list(tmp_path.iterdir()) == [tmp_path / ".secret_key"]
