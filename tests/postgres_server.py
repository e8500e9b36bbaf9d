"""A private PostgreSQL server (Debian's ``postgresql`` package) for the capture tests.

``PostgresServer(directory)`` runs ``initdb`` into `directory` and ``postgres`` on 127.0.0.1 and a
free port, with ``wal_level=logical`` (logical decoding) and trust authentication, TCP only.
PostgreSQL refuses to run as root, so as root both run as the unprivileged ``nobody`` (Popen's
``user=``; the directory is given to it). Without the binaries the tests are skipped with the
install hint, and fail under CI (tests/system_programs.py).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time

import pytest

from tests.kafka_servers import free_port
from tests.system_programs import under_ci

RUN_AS = "nobody"


def postgres_bin_dir() -> str | None:
    """The newest /usr/lib/postgresql/N/bin with initdb and postgres, or the PATH's."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def require_postgres() -> str:
    bin_dir = postgres_bin_dir()
    if bin_dir:
        return bin_dir
    message = "PostgreSQL is missing (initdb, postgres): `make test` installs postgresql (as root)"
    if under_ci():
        pytest.fail(message)
    pytest.skip(message)


class PostgresServer:
    """Started on entry, stopped on exit (SIGTERM, a fast shutdown; then SIGKILL)."""

    def __init__(self, bin_dir: str) -> None:
        self.bin_dir = bin_dir
        # not under pytest's tmp_path: as root that is private to root, and the server is nobody
        self.directory = tempfile.mkdtemp(prefix="tidelog-pg-")
        self.data = os.path.join(self.directory, "data")
        self.log_path = os.path.join(self.directory, "postgres.log")
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.as_root = os.geteuid() == 0

    def _command(self, program: str, *args: str) -> list[str]:
        return [os.path.join(self.bin_dir, program), *args]

    def _as_user(self) -> dict:
        """Popen's arguments that drop root for `RUN_AS` (PostgreSQL refuses to run as root)."""
        if not self.as_root:
            return {}
        entry = pwd.getpwnam(RUN_AS)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def __enter__(self) -> PostgresServer:
        if self.as_root:
            shutil.chown(self.directory, RUN_AS)
        subprocess.run(
            self._command(
                "initdb",
                "-D",
                self.data,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ),
            check=True,
            capture_output=True,
            cwd=self.directory,
            **self._as_user(),
        )
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            self._command(
                "postgres",
                "-D",
                self.data,
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "wal_level=logical",
                "-c",
                "max_replication_slots=20",
                "-c",
                "max_wal_senders=20",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ),
            stdout=log,
            stderr=log,
            cwd=self.directory,
            **self._as_user(),
        )
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 60.0) -> None:
        import psycopg2

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg2.connect(self.dsn(), connect_timeout=2).close()
                return
            except psycopg2.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"postgres did not start:\n{self.log_tail()}") from None
                time.sleep(0.1)

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # a fast shutdown
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
