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
    assert (config.kafka_listener, config.kafka_auto_create) == (True, True)
    assert config.kafka_default_partitions == 1
    assert config.kafka_max_request_bytes == 100 * 1024 * 1024


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
            "TIDELOG_KAFKA_AUTO_CREATE": "0",
            "TIDELOG_KAFKA_DEFAULT_PARTITIONS": "6",
            "TIDELOG_KAFKA_MAX_REQUEST_BYTES": "1048576",
        }
    )
    assert config.kafka_auto_create is False
    assert (config.kafka_default_partitions, config.kafka_max_request_bytes) == (6, 1048576)

    assert config.data_dir == tmp_path
    assert (config.debug, config.demo) == (True, False)
    assert (config.http_port, config.kafka_port) == (8081, 19092)
    assert config.allowed_hosts[-2:] == ("tidelog.internal", "other.host")
    assert config.database_url == "postgres://u:p@db/tidelog"
    assert config.redis_url == "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TIDELOG_HTTP_PORT", "http"),
        ("TIDELOG_HTTP_PORT", "70000"),
        ("TIDELOG_DEMO", "maybe"),
        ("TIDELOG_KAFKA_DEFAULT_PARTITIONS", "0"),
        ("TIDELOG_KAFKA_MAX_REQUEST_BYTES", "lots"),
        ("TIDELOG_KAFKA_SUPER_USERS", "admin"),
        ("TIDELOG_CLUSTER_CONFIG", "/no/such/client.properties"),
    ],
)
def test_bad_values_are_refused_with_the_variable_named(name, value):
    with pytest.raises(ConfigError, match=name):
        Config.from_env({name: value})


def test_super_users_and_the_cluster_config(tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SSL\n")
    config = Config.from_env(
        {
            "TIDELOG_KAFKA_SUPER_USERS": "User:admin; User:ops",
            "TIDELOG_CLUSTER_CONFIG": str(properties),
        }
    )
    assert config.kafka_super_users == ("User:admin", "User:ops")
    assert config.cluster_config == properties


def test_secret_key_is_generated_once_with_owner_only_permissions(tmp_path):
    first = load_or_create_secret_key(tmp_path)
    second = load_or_create_secret_key(tmp_path)

    assert first == second
    assert len(first) >= 50
    assert stat.S_IMODE((tmp_path / ".secret_key").stat().st_mode) == 0o600
    assert list(tmp_path.iterdir()) == [tmp_path / ".secret_key"]


def test_listener_settings_reach_the_console_s_kafka_listener(settings, tmp_path):
    """TIDELOG_KAFKA_AUTO_CREATE=0 under `make run`: a Kafka client asking for an unknown
    topic gets UNKNOWN_TOPIC_OR_PART and nothing is created."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    from brokerui.broker import close_broker, get_broker

    close_broker()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    settings.TIDELOG_KAFKA_LISTENER = True
    settings.TIDELOG_KAFKA_PORT = 0  # any free port
    settings.TIDELOG_KAFKA_AUTO_CREATE = False
    settings.TIDELOG_KAFKA_DEFAULT_PARTITIONS = 3
    settings.TIDELOG_KAFKA_MAX_REQUEST_BYTES = 65536
    try:
        broker = get_broker()
        host, port = broker.kafka_address
        admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
        topic = admin.list_topics(topic="not-there", timeout=10).topics["not-there"]
        assert topic.error is not None
        assert topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert "not-there" not in broker.store.list_topics()
    finally:
        close_broker()


def _migrate(data_dir):
    """`manage.py migrate` as `make run` runs it, under the usual umask 022."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TIDELOG_DATA_DIR": str(data_dir), "TIDELOG_DEMO": "0"}
    env.pop("DATABASE_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=REPO_DIR,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
        preexec_fn=lambda: os.umask(0o022),
    )


def test_a_fresh_sqlite_database_is_created_owner_only(tmp_path):
    """Sessions and API tokens live in it: 0600 from the first byte, like the secret key."""
    _migrate(tmp_path / "data")

    db = tmp_path / "data" / "tidelog.sqlite3"
    assert db.stat().st_size > 0  # migrated: the tables are in this file
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert not any(p.name.startswith("tidelog.sqlite3-") for p in db.parent.iterdir())


def test_an_existing_world_readable_database_is_tightened(tmp_path):
    _migrate(tmp_path / "data")
    db = tmp_path / "data" / "tidelog.sqlite3"
    db.chmod(0o644)

    _migrate(tmp_path / "data")

    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_kafka_port_security_is_off_unless_asked(tmp_path):
    from tests.tls import self_signed_cert

    config = Config.from_env({})
    assert (config.kafka_sasl, config.kafka_tls_cert, config.kafka_tls_key) == (False, None, None)
    cert, key = self_signed_cert(tmp_path)
    config = Config.from_env(
        {
            "TIDELOG_KAFKA_SASL": "1",
            "TIDELOG_KAFKA_TLS_CERT": str(cert),
            "TIDELOG_KAFKA_TLS_KEY": str(key),
        }
    )
    assert (config.kafka_sasl, config.kafka_tls_cert, config.kafka_tls_key) == (True, cert, key)


def test_kafka_tls_needs_both_files_and_loadable_ones(tmp_path):
    from tests.tls import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    with pytest.raises(ConfigError, match="TIDELOG_KAFKA_TLS_KEY is not"):
        Config.from_env({"TIDELOG_KAFKA_TLS_CERT": str(cert)})
    with pytest.raises(ConfigError, match="cannot load the certificate"):
        Config.from_env({"TIDELOG_KAFKA_TLS_CERT": str(key), "TIDELOG_KAFKA_TLS_KEY": str(key)})
    with pytest.raises(ConfigError, match="TIDELOG_KAFKA_SASL"):
        Config.from_env({"TIDELOG_KAFKA_SASL": "maybe"})


def test_export_is_on_unless_turned_off():
    assert Config.from_env({}).export_enabled is True
    assert Config.from_env({"TIDELOG_EXPORT": "0"}).export_enabled is False
    with pytest.raises(ConfigError, match="TIDELOG_EXPORT"):
        Config.from_env({"TIDELOG_EXPORT": "maybe"})


def test_single_sign_on_settings(tmp_path):
    assert Config.from_env({}).oidc_issuer is None
    secret = tmp_path / "oidc-secret"
    secret.write_text("s3cret\n")
    config = Config.from_env(
        {
            "TIDELOG_OIDC_ISSUER": "https://id.example.com/realms/data",
            "TIDELOG_OIDC_CLIENT_ID": "tidelog",
            "TIDELOG_OIDC_CLIENT_SECRET_FILE": str(secret),
            "TIDELOG_OIDC_NAME": "Keycloak",
        }
    )
    assert (config.oidc_issuer, config.oidc_client_id, config.oidc_client_secret) == (
        "https://id.example.com/realms/data",
        "tidelog",
        "s3cret",
    )
    assert (config.oidc_name, config.oidc_groups_claim) == ("Keycloak", "groups")
    with pytest.raises(ConfigError, match="needs TIDELOG_OIDC_CLIENT_ID"):
        Config.from_env({"TIDELOG_OIDC_ISSUER": "https://id.example.com"})
    with pytest.raises(ConfigError, match="must be an http"):
        Config.from_env({"TIDELOG_OIDC_ISSUER": "id.example.com"})
    with pytest.raises(ConfigError, match="SECRET_FILE: cannot read it"):
        Config.from_env(
            {
                "TIDELOG_OIDC_ISSUER": "https://id.example.com",
                "TIDELOG_OIDC_CLIENT_ID": "x",
                "TIDELOG_OIDC_CLIENT_SECRET_FILE": str(tmp_path / "missing"),
            }
        )
