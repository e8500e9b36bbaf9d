"""Client properties for an external cluster (streams.cluster.connection): Kafka's
client.properties with librdkafka's names, secrets from the environment or a file, checks that
say what is wrong in one sentence without the secret, and redaction."""

from __future__ import annotations

import pytest

from streams.cluster.connection import (
    HIDDEN,
    check_client_properties,
    hide_secrets,
    read_client_properties,
    redacted,
)
from streams.cluster.kafka_io import kafka_python_config
from streams.errors import ClusterUnavailable, InvalidConfig


def _props(tmp_path, text: str):
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def test_properties_with_secrets_from_the_environment_and_a_file(tmp_path, monkeypatch):
    secret = tmp_path / "key-password"
    secret.write_text("k3y-pass\n")
    monkeypatch.setenv("CLUSTER_PASSWORD", "s3cr3t-Passw0rd")
    path = _props(
        tmp_path,
        "# as for kafka-consumer-groups.sh --command-config\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism: SCRAM-SHA-512\n"
        "! another comment\n"
        "sasl.username=console\n"
        "sasl.password=${env:CLUSTER_PASSWORD}\n"
        f"ssl.key.password=${{file:{secret}}}\n"
        "client.id=pre-${env:CLUSTER_PASSWORD}-post\n",
    )
    conf = read_client_properties(path)
    assert conf == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "console",
        "sasl.password": "s3cr3t-Passw0rd",
        "ssl.key.password": "k3y-pass",
        "client.id": "pre-s3cr3t-Passw0rd-post",
    }
    shown = redacted(conf)
    assert shown["sasl.password"] == shown["ssl.key.password"] == HIDDEN
    assert shown["sasl.username"] == "console"
    assert hide_secrets("auth failed for s3cr3t-Passw0rd", conf) == f"auth failed for {HIDDEN}"


def test_bad_files_and_references_are_one_clear_sentence(tmp_path, monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(InvalidConfig, match="line 2: expected key=value"):
        read_client_properties(_props(tmp_path, "a=b\nsecurity.protocol\n"))
    with pytest.raises(InvalidConfig, match="the environment variable NOT_SET_ANYWHERE is not"):
        read_client_properties(_props(tmp_path, "sasl.password=${env:NOT_SET_ANYWHERE}\n"))
    with pytest.raises(InvalidConfig, match="No such file"):
        read_client_properties(_props(tmp_path, "sasl.password=${file:/nonexistent/pw}\n"))
    with pytest.raises(InvalidConfig, match="No such file"):
        read_client_properties(tmp_path / "missing.properties", what="TIDELOG_CLUSTER_CONFIG")


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"security.protocol": "SASL_TLS"}, "expected one of PLAINTEXT, SSL, SASL_PLAINTEXT"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-1"}, "OAUTHBEARER"),
        ({"security.protocol": "SASL_SSL"}, "GSSAPI"),  # librdkafka's default, not built here
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
            "PLAIN needs a user",
        ),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "no such file"),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "yes"},
            "expected https or none",
        ),
    ],
)
def test_settings_that_cannot_connect_are_refused(conf, message):
    with pytest.raises(InvalidConfig, match=message) as info:
        check_client_properties(conf)
    assert "password" not in str(info.value).lower() or "needs a user" in str(info.value)


def test_good_settings_pass(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    check_client_properties({})
    check_client_properties(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.location": str(ca),
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    check_client_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"})


def test_kafka_python_gets_the_same_connection():
    conf = {
        "bootstrap.servers": "h:9093",
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert kafka_python_config(conf) == {
        "bootstrap_servers": "h:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": False,
    }
    verified = kafka_python_config({**conf, "ssl.endpoint.identification.algorithm": "https"})
    assert verified["ssl_check_hostname"] is True
    with pytest.raises(ClusterUnavailable, match="OAUTHBEARER"):
        kafka_python_config({**conf, "sasl.mechanism": "OAUTHBEARER"})
