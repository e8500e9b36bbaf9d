"""Shared helpers for the benchmarks in tests/bench/ (see DEVELOPERS.md, "Benchmarks").

- ``scale()``: the size factor from ``BENCH_SCALE`` (1.0 = the sizes the issue asks for);
- ``temp_dir()``: a scratch directory on the work disk (``BENCH_TMP``, default /work/tmp),
  removed afterwards;
- ``RedisServer``: a private ``redis-server`` on a free loopback port, stopped (and killed if
  need be) on exit, with ``kill()``/``start()`` for crash-restart measurements;
- ``median``/``percentile``/``timed``: statistics and timing;
- ``Row``, ``print_table``, ``write_results``: the table on stdout and
  ``bench-results/<name>.json``.

The JSON file is a list of rows ``{metric, unit, tidelog, peer, peer_value, ratio, target, pass,
note}``. ``ratio`` is how many times better Tidelog is, so higher is always better:
``tidelog / peer_value`` for throughputs and ``peer_value / tidelog`` for latencies and durations
(``null`` without a peer). ``pass`` is ``null`` for rows without a target.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "bench-results"
DEFAULT_TMP = "/work/tmp"


# ------------------------------------------------------------------------------ sizes and dirs


def scale() -> float:
    """``BENCH_SCALE`` (default 1.0); e.g. 0.01 for a quick smoke run."""
    raw = os.environ.get("BENCH_SCALE", "1.0")
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"BENCH_SCALE must be a number, got {raw!r}") from None
    if not 0 < value <= 10:
        raise SystemExit(f"BENCH_SCALE must be in (0, 10], got {raw!r}")
    return value


def scaled(full: int, minimum: int = 1) -> int:
    """`full` times ``scale()``, at least `minimum`."""
    return max(minimum, int(full * scale()))


def tmp_base() -> str:
    base = os.environ.get("BENCH_TMP", DEFAULT_TMP)
    os.makedirs(base, exist_ok=True)
    return base


@contextlib.contextmanager
def temp_dir(prefix: str = "bench-") -> Iterator[str]:
    """A fresh directory under ``BENCH_TMP``; removed on exit, even on error."""
    path = tempfile.mkdtemp(prefix=prefix, dir=tmp_base())
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def dir_size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


# ------------------------------------------------------------------------------ statistics


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of nothing")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in [0, 100]): a value that was actually measured."""
    if not values:
        raise ValueError("percentile of nothing")
    s = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(s)))
    return s[min(rank, len(s)) - 1]


def timed(fn: Callable[[], object]) -> float:
    """Seconds `fn()` took (perf_counter)."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


# ------------------------------------------------------------------------------ redis-server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_binary() -> str:
    found = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not found and os.path.exists("/usr/bin/redis-server"):
        found = "/usr/bin/redis-server"
    if not found:
        raise SystemExit(
            "redis-server not found: install Debian's package (apt-get install redis-server) "
            "or set REDIS_SERVER"
        )
    return found


class RedisServer:
    """A private redis-server in `directory`, on 127.0.0.1 and a free port.

    Use as a context manager: it starts on entry and is always stopped on exit (SHUTDOWN NOSAVE,
    then SIGKILL if it does not go). ``kill()`` simulates a crash; ``start()`` again on the same
    directory returns the seconds until the server answers PING (after loading its data).
    """

    def __init__(
        self,
        directory: str,
        *,
        appendonly: bool = True,
        appendfsync: str = "everysec",
        extra_args: Sequence[str] = (),
        port: int | None = None,
    ):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.port = port or free_port()
        self.args = [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            directory,
            "--daemonize",
            "no",
            "--logfile",
            os.path.join(directory, "redis.log"),
            "--save",
            "",
            "--appendonly",
            "yes" if appendonly else "no",
            "--appendfsync",
            appendfsync,
            *extra_args,
        ]
        self.process: subprocess.Popen | None = None

    # -------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 600.0) -> float:
        """Spawn the server; return seconds from spawn until PING is answered."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("redis-server is already running")
        started = time.perf_counter()
        with open(os.path.join(self.directory, "redis.stderr"), "ab") as err:
            self.process = subprocess.Popen(self.args, stdout=err, stderr=err)
        self.wait_ready(timeout)
        return time.perf_counter() - started

    def wait_ready(self, timeout: float) -> None:
        import redis

        deadline = time.monotonic() + timeout
        client = redis.Redis(
            host="127.0.0.1", port=self.port, socket_connect_timeout=1, socket_timeout=5
        )
        try:
            while True:
                if self.process is None or self.process.poll() is not None:
                    raise RuntimeError(f"redis-server exited early:\n{self.log_tail()}")
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"redis-server not ready after {timeout} s")
                time.sleep(0.002)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown, whatever the AOF holds is what a restart finds."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(Exception):
            client = self.client(socket_timeout=5)
            with contextlib.suppress(Exception):
                client.shutdown(nosave=True)
            client.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -------------------------------------------------------------- helpers

    def client(self, parser: str | None = None, **kwargs):
        """A redis-py client. `parser`: ``"hiredis"`` (redis-py with the hiredis C parser, as
        users run it; refused when hiredis is not installed), ``"python"`` (redis-py's own
        pure-Python parser) or None (redis-py's default: hiredis when installed)."""
        import redis

        kwargs.setdefault("socket_timeout", 300)
        if parser is None:
            return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)
        from redis.connection import _HiredisParser, _RESP2Parser
        from redis.utils import HIREDIS_AVAILABLE

        if parser == "hiredis" and not HIREDIS_AVAILABLE:
            raise SystemExit(
                "hiredis is not installed: pip install -r requirements-bench.txt (make bench)"
            )
        # _RESP2Parser: redis-py swaps in its RESP3 twin when the connection speaks RESP3
        cls = {"hiredis": _HiredisParser, "python": _RESP2Parser}[parser]
        pool = redis.ConnectionPool(host="127.0.0.1", port=self.port, parser_class=cls, **kwargs)
        client = redis.Redis(connection_pool=pool)
        client.auto_close_connection_pool = True
        return client

    @staticmethod
    def parser_in_use(client) -> str:
        """The class name of the reply parser a live connection of `client` uses (to show that
        the hiredis rows really ran on hiredis)."""
        pool = client.connection_pool
        conn = pool.get_connection()
        try:
            return type(conn._parser).__name__
        finally:
            pool.release(conn)

    def wait_persistence_idle(self, timeout: float = 600.0) -> None:
        """Wait until no AOF rewrite / RDB save runs (they fork and would skew timings)."""
        client = self.client()
        try:
            deadline = time.monotonic() + timeout
            while True:
                info = client.info("persistence")
                busy = (
                    info.get("aof_rewrite_in_progress")
                    or info.get("aof_rewrite_scheduled")
                    or info.get("rdb_bgsave_in_progress")
                )
                if not busy or time.monotonic() > deadline:
                    return
                time.sleep(0.05)
        finally:
            client.close()

    def version(self) -> str:
        client = self.client()
        try:
            return str(client.info("server").get("redis_version"))
        finally:
            client.close()

    def log_tail(self, lines: int = 20) -> str:
        tail = []
        for name in ("redis.stderr", "redis.log"):
            try:
                with open(os.path.join(self.directory, name), encoding="utf-8") as f:
                    tail += f.readlines()[-lines:]
            except OSError:
                pass
        return "".join(tail) or "(redis-server wrote nothing)"


# ------------------------------------------------------------------------------ results


@dataclasses.dataclass
class Row:
    """One metric. `higher_is_better` decides the ratio's direction (see the module doc);
    `check` (given the row) decides pass/fail against `target`."""

    metric: str
    unit: str
    tidelog: float
    peer: str | None = None
    peer_value: float | None = None
    target: str | None = None
    check: Callable[[Row], bool] | None = None
    higher_is_better: bool = True
    note: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.peer_value is None or not self.tidelog or not self.peer_value:
            return None
        if self.higher_is_better:
            return self.tidelog / self.peer_value
        return self.peer_value / self.tidelog

    @property
    def passed(self) -> bool | None:
        return None if self.check is None else bool(self.check(self))

    def as_json(self) -> dict:
        return {
            "metric": self.metric,
            "unit": self.unit,
            "tidelog": _round(self.tidelog),
            "peer": self.peer,
            "peer_value": _round(self.peer_value),
            "ratio": _round(self.ratio),
            "target": self.target,
            "pass": self.passed,
            "note": self.note,
        }


def at_least_ratio(k: float) -> Callable[[Row], bool]:
    return lambda row: row.ratio is not None and row.ratio >= k


def at_most(limit: float) -> Callable[[Row], bool]:
    return lambda row: row.tidelog <= limit


def _round(x: float | None) -> float | None:
    if x is None:
        return None
    if x == 0 or abs(x) >= 100:
        return round(x, 1)
    return float(f"{x:.4g}")


def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.3g}"


def table(rows: Sequence[Row]) -> str:
    header = ["metric", "unit", "tidelog", "peer", "peer value", "ratio", "target", "pass"]
    body = [
        [
            r.metric,
            r.unit,
            fmt(r.tidelog),
            r.peer or "-",
            fmt(r.peer_value),
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
            r.target or "-",
            {True: "PASS", False: "FAIL", None: "-"}[r.passed],
        ]
        for r in rows
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body, strict=True)]
    numeric = {2, 4, 5}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(cells) for cells in body]
    notes = [f"  {r.metric}: {r.note}" for r in rows if r.note]
    if notes:
        out += ["", "notes:", *notes]
    return "\n".join(out)


def print_table(rows: Sequence[Row]) -> None:
    print(table(rows), flush=True)


def write_results(name: str, rows: Sequence[Row]) -> Path:
    """Write ``bench-results/<name>.json`` (a list of rows); return its path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps([r.as_json() for r in rows], indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def log(message: str) -> None:
    """A timestamped progress line on stdout, flushed (benchmarks run for minutes)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
