"""A private PostgreSQL (a fresh database per test) and the console's broker with its Kafka
listener on a free port (capture sources write through it): the dual-write tests' fixtures."""

from tests.brokerui.dualwrite.conftest import listening_broker  # noqa: F401
from tests.capture.conftest import pg_dsn, postgres_server  # noqa: F401
