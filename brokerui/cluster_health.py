"""Each cluster's health for the overview: reachable or not (and why), its topic count, how long
the check took and when it ran.

A background thread checks every cluster every `INTERVAL_S` seconds, each on a thread of its
own, so an unreachable cluster (whose client waits its whole timeout) neither delays the
others' checks nor any page: `snapshot()` answers at once with the last results (a cluster not
checked yet says so), and starts the checker on first use. The built-in broker is checked
through its store. Thread-safe.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time

from brokerui import cluster as clusters
from streams.log import is_internal

INTERVAL_S = 10.0
log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ClusterHealth:
    name: str
    external: bool
    url: str  # "built-in" or kafka://...
    state: str  # "up", "down" or "unknown" (not checked yet)
    detail: str  # why it is down ("" when up)
    topics: int | None
    took_ms: float | None  # how long the check took
    checked_ms: int | None  # when it ran (epoch ms)
    current: bool = False

    @property
    def href(self) -> str:
        entry = clusters.find(self.name)
        return clusters.home_url(entry) if entry else "/"


_lock = threading.Lock()
_results: dict[str, ClusterHealth] = {}
_thread: threading.Thread | None = None
_pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="tidelog-cluster-health")


def snapshot() -> list[ClusterHealth]:
    """Every cluster's last known health, in the clusters' order (the current one marked);
    [] when the console has one cluster."""
    if len(clusters.entries()) < 2:
        return []
    _start()
    now = clusters.current().name
    with _lock:
        results = dict(_results)
    out = []
    for entry in clusters.entries():
        found = results.get(entry.name) or ClusterHealth(
            entry.name, not entry.builtin, entry.url or "built-in", "unknown",
            "not checked yet", None, None, None,
        )  # fmt: skip
        out.append(dataclasses.replace(found, current=entry.name == now))
    return out


def check(entry) -> ClusterHealth:
    """One cluster's health now (blocking: an unreachable cluster takes its client's
    timeout)."""
    started = time.perf_counter()
    try:
        if entry.builtin:  # its store, if the broker is open (a check never opens it)
            from brokerui.broker import open_broker

            broker = open_broker()
            if broker is None:
                raise RuntimeError("the built-in broker is not open")
            topics = sum(1 for name in broker.store.list_topics() if not is_internal(name))
        else:
            with clusters.using(entry.name):
                topics = len(clusters.get_cluster().list_topics())
        state, detail = "up", ""
    except Exception as exc:  # noqa: BLE001 - any failure is what the overview shows
        state, detail, topics = "down", str(exc) or type(exc).__name__, None
    return ClusterHealth(
        entry.name,
        not entry.builtin,
        entry.url or "built-in",
        state,
        detail,
        topics,
        (time.perf_counter() - started) * 1000,
        int(time.time() * 1000),
    )


def _start() -> None:
    global _thread
    with _lock:
        if _thread is not None:
            return
        _thread = threading.Thread(target=_run, name="tidelog-cluster-health", daemon=True)
        _thread.start()


def _run() -> None:
    global _thread
    pending: dict[str, concurrent.futures.Future] = {}
    while True:
        try:
            entries = clusters.entries()
        except Exception:  # noqa: BLE001 - settings being torn down (exit): try again later
            log.exception("cannot list the clusters to check")
            time.sleep(INTERVAL_S)
            continue
        if len(entries) < 2:  # back to one cluster (settings changed): nothing to show
            with _lock:
                _thread = None
            return
        for entry in entries:
            if entry.name in pending and not pending[entry.name].done():
                continue  # still waiting on its last check: not a second one
            try:
                pending[entry.name] = _pool.submit(_record, entry)
            except RuntimeError:  # the interpreter is exiting: its pool takes no more work
                with _lock:
                    _thread = None
                return
        time.sleep(INTERVAL_S)


def _record(entry) -> None:
    result = check(entry)
    with _lock:
        _results[entry.name] = result


def reset() -> None:
    """Forget the results (tests); the checker goes on."""
    with _lock:
        _results.clear()
