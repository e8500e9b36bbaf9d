"""Fixtures of the capture tests: one private PostgreSQL server for the session (a fresh database
per test), and a Tidelog broker per test whose Kafka listener binds port 0."""

from __future__ import annotations

import itertools

import pytest

from tests.postgres_server import PostgresServer, require_postgres
from tests.protocol.conftest import open_broker

_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres_server():
    with PostgresServer(require_postgres()) as server:
        yield server


@pytest.fixture
def pg_dsn(postgres_server) -> str:
    """The DSN of a new, empty database on the session's server."""
    import psycopg2

    name = f"capture_{next(_databases)}"
    conn = psycopg2.connect(postgres_server.dsn())
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    return postgres_server.dsn(name)


@pytest.fixture
def broker(tmp_path):
    b = open_broker(tmp_path / "data")
    yield b
    b.close()


@pytest.fixture
def bootstrap(broker) -> str:
    host, port = broker.kafka_address
    return f"{host}:{port}"
