"""A secured external cluster for the console's tests: Tidelog's own listener in a process of
its own, requiring SASL/SCRAM over TLS (a certificate made for the test), and the client
properties a user would write for it (librdkafka's names, the password from the
environment)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.kafka_servers import TidelogListener
from tests.tls import self_signed_cert

USER, PASSWORD = "console", "Sc7am-Passw0rd-for-tests"
VIEWER, VIEWER_PASSWORD = "reader", "Re4der-Passw0rd-for-tests"
PASSWORD_ENV = "TIDELOG_TEST_CLUSTER_PASSWORD"


class SecuredListener(TidelogListener):
    """Tidelog's listener with ``--sasl-users`` and ``--tls-cert/--tls-key``: SASL_SSL.
    `client_properties` is the properties file to connect with (SCRAM-SHA-512, the CA, host
    name verification on); the password comes from ``$TIDELOG_TEST_CLUSTER_PASSWORD``, which
    `start` sets."""

    name = "tidelog (SASL_SSL)"

    def __init__(
        self, directory: Path, *, mechanism: str = "SCRAM-SHA-512", expired_cert: bool = False
    ):
        directory.mkdir(parents=True, exist_ok=True)
        self.cert, self.key = self_signed_cert(directory, expired=expired_cert)
        users = directory / "users.txt"
        users.write_text(
            f"# user:password:role\n{USER}:{PASSWORD}:operator\n{VIEWER}:{VIEWER_PASSWORD}:viewer\n"
        )
        users.chmod(0o600)
        self.client_properties = directory / "client.properties"
        self.client_properties.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={mechanism}\n"
            f"sasl.username={USER}\n"
            f"sasl.password=${{env:{PASSWORD_ENV}}}\n"
            f"ssl.ca.location={self.cert}\n"
            "ssl.endpoint.identification.algorithm=https\n"
        )
        super().__init__(
            str(directory / "data"),
            extra_args=(
                "--initial-rebalance-delay-ms", "0", "--sasl-users", str(users),
                "--tls-cert", str(self.cert), "--tls-key", str(self.key),
            ),
        )  # fmt: skip

    @property
    def client_config(self) -> dict[str, str]:
        """The same settings for a test's own confluent-kafka clients."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
            "ssl.ca.location": str(self.cert),
        }

    def start(self, timeout: float = 60.0) -> None:
        os.environ[PASSWORD_ENV] = PASSWORD
        super().start(timeout)


def plain_or_secured(kind: str, tmp_path_factory):
    """A module's `server` fixture body for tests that run on both kinds of external cluster:
    ``plaintext`` (Tidelog's listener as is) or ``sasl_ssl`` (SecuredListener)."""
    from tests.kafka_servers import kafka_server

    directory = tmp_path_factory.mktemp(f"kafka-{kind}")
    if kind == "plaintext":
        with kafka_server(str(directory)) as s:
            yield s
    else:
        with SecuredListener(directory) as s:
            yield s
