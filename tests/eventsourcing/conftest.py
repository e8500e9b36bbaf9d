"""The capture tests' PostgreSQL (one private server per session, a fresh database per test) and
broker (Kafka listener on port 0), for the dual-write race's cdc mode."""

from tests.capture.conftest import bootstrap, broker, pg_dsn, postgres_server  # noqa: F401
