"""Interactive queries across processes: a worker's query endpoint, and a ``ViewQuery`` that
routes each partition to the worker that owns it (Kafka Streams' ``application.server``).

- ``ViewServer``: a small HTTP endpoint (stdlib ``ThreadingHTTPServer``) on a worker that
  answers for the partitions its runners serve (``POST /query`` with a JSON body; nothing
  else). It never forwards: a partition it does not serve is a 503 ``view_unavailable``.
- Advertising: a worker in a group puts its endpoint in its group member's client id,
  ``tidelog-job-<job>@<host>:<port>`` (``member_client_id``); the group's description (the
  coordinator's, or DescribeGroups over the Kafka protocol) then says which member — hence
  which endpoint — owns each partition (``owners_from_group``). No registry topic to keep in
  step: the assignment is the group's own.
- ``RoutedViews``: answers from the local runners where they serve the partition, else asks
  the owner's endpoint; a range merges the local and remote partitions' rows and tokens. A
  ``wait_for`` runs in stages across the owners (the input partitions' owners first, then,
  per repartition topic upstream of the view, every owner up to that topic's end offsets read
  once the previous stage was reached), so read-your-writes holds across processes too.

The view's shape (partition count, key serde, windowed) comes from a local runner of the job:
the router needs one worker of the job in its own process (the console's embedded workers).

Thread-safety: ``ViewServer`` serves each request on its own thread; ``RoutedViews`` is as
thread-safe as the views.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from streams.errors import InvalidConfig, TidelogError
from streams.jobs.serde import BYTES, JSON, KEY, TEXT, Serde
from streams.jobs.views import (
    MAX_ROWS,
    Answer,
    LocalViews,
    Token,
    UnknownView,
    View,
    ViewInfo,
    ViewRegistry,
    ViewTimeout,
    ViewUnavailable,
    _key,
    _limit,
    _parse_wait_for,
    order,
)
from streams.log.partitioner import partition_for_key

MAX_BODY = 64 * 1024
_ERRORS: dict[type[TidelogError], int] = {
    UnknownView: 404,
    ViewUnavailable: 503,
    ViewTimeout: 504,
    InvalidConfig: 400,
}
_BY_CODE = {cls.code: cls for cls in _ERRORS}
_ENDPOINT = re.compile(r"@([A-Za-z0-9.\-\[\]:]+:\d+)$")


def member_client_id(job: str, endpoint: str | None) -> str:
    """The client id a worker of `job` joins its group with: its query endpoint after ``@``."""
    base = f"tidelog-job-{job}"
    return f"{base}@{endpoint}" if endpoint else base


def is_job_member(group_id: str, client_id: str) -> bool:
    """Whether a member of group `group_id` with `client_id` is a worker of the stream job of
    that name (``member_client_id``'s form: the job's group is named after the job)."""
    base = member_client_id(group_id, None)
    return client_id == base or (client_id or "").startswith(base + "@")


def endpoint_of(client_id: str) -> str | None:
    m = _ENDPOINT.search(client_id or "")
    return m.group(1) if m else None


def owners_from_group(description) -> dict[int, str]:
    """Partition number → query endpoint, from a group description (members with
    ``client_id`` and ``assignment`` {topic: [partitions]}); members without one are left
    out."""
    owners: dict[int, str] = {}
    for member in description.members:
        endpoint = endpoint_of(member.client_id)
        if endpoint is None:
            continue
        for partitions in member.assignment.values():
            for p in partitions:
                owners[p] = endpoint
    return owners


# ------------------------------------------------------------------------------ the server


class ViewServer:
    """Serves `registry`'s views on ``host:port`` (port 0: a free one; ``address`` says). The
    socket is bound at once (so the address can be advertised before the worker joins); the
    registry may be set until ``start``."""

    def __init__(self, registry: ViewRegistry | None, host: str = "127.0.0.1", port: int = 0):
        self.registry = registry
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                if self.path != "/query":
                    self._send(404, {"error": {"code": "not_found", "message": self.path}})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._send(413, {"error": {"code": "too_large", "message": "body"}})
                    return
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    self._send(200, server.answer(body))
                except TidelogError as exc:
                    status = next((s for c, s in _ERRORS.items() if isinstance(exc, c)), 400)
                    self._send(status, {"error": {"code": exc.code, "message": str(exc)}})
                except (ValueError, TypeError, KeyError) as exc:
                    self._send(400, {"error": {"code": "invalid_request", "message": str(exc)}})

            def _send(self, status: int, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format, *args) -> None:  # quiet: no line per query
                pass

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.address = f"{host}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name=f"view-server-{self.address}", daemon=True
        )

    def start(self) -> ViewServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, body: dict) -> dict:
        """One query: ``{"op": "describe"|"partition"|"get"|"range"|"windows"|"wait", "job",
        "view", ...}``."""
        if self.registry is None:
            raise ViewUnavailable("this worker's views are not ready yet")
        op = body.get("op")
        if op == "describe":
            return {
                "views": [_describe(v) for v in self.registry.jobs().get(body["job"], {}).values()]
            }
        view = self.registry.view(str(body["job"]), str(body["view"]))
        if op == "partition":
            return {"partition": view.partition_of(_key(body["key"]))}
        if op == "wait":
            view.wait_offsets(_parse_wait_for(body["targets"]), float(body["timeout_s"]))
            return {"ok": True}
        if op == "get":
            ans = view.get(body["key"])
        elif op == "windows":
            ans = view.windows(
                body["key"],
                time_from=body.get("time_from"),
                time_to=body.get("time_to"),
                limit=body["limit"],
            )
        elif op == "range":
            ans = view.range(
                body.get("lo"), body.get("hi"), limit=body["limit"], partitions=body["partitions"]
            )
        else:
            raise InvalidConfig("op", op, "must be get, range, windows or wait")
        return {
            "rows": [[k, r] for k, r in ans.rows],
            "truncated": ans.truncated,
            "token": ans.token.to_dict(),
        }


def _describe(v: View) -> dict:
    """A view's shape, for a router in a process without a worker of the job."""
    info = v.info()
    name = getattr(v.key_serde, "name", None)
    return {
        "name": v.name,
        "kind": v.kind,
        "windowed": v.windowed,
        "partitions": v.partitions,
        "key_serde": name if name in _SERDES else None,
        "input_topics": sorted(v.input_topics),
        "repartition_topics": v.repartition_topics,
        "served": info.served,
        "keys": info.keys,
        "as_of_ms": info.as_of_ms,
    }


_SERDES: dict[str, Serde] = {"bytes": BYTES, "text": TEXT, "json": JSON, "key": KEY}


# ------------------------------------------------------------------------------ the client


def ask(endpoint: str, body: dict, timeout_s: float) -> dict:
    """POST `body` to a worker's endpoint; its error comes back as the same exception."""
    request = urllib.request.Request(
        f"http://{endpoint}/query",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s + 5) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())["error"]
        except (ValueError, KeyError):
            error = {"code": "view_unavailable", "message": str(exc)}
        cls = _BY_CODE.get(error.get("code"), ViewUnavailable)
        if cls is InvalidConfig:
            raise InvalidConfig("query", body.get("op"), error["message"]) from None
        raise cls(f"worker {endpoint}: {error['message']}") from None
    except OSError as exc:
        raise ViewUnavailable(f"the worker at {endpoint} does not answer: {exc}") from exc


def _answer_of(data: dict) -> Answer:
    rows = [(_key(k), r) for k, r in data["rows"]]
    t = data["token"]
    offsets = {
        topic: {int(p): o for p, o in parts.items()} for topic, parts in t["offsets"].items()
    }
    return Answer(rows, Token(offsets, t["watermark_ms"], t["as_of_ms"]), data["truncated"])


def merge_tokens(tokens: list[Token]) -> Token:
    """What several partial answers reflect together: their offsets; the smallest watermark
    (None if any has none); the newest as-of."""
    offsets: dict[str, dict[int, int]] = {}
    for t in tokens:
        for topic, parts in t.offsets.items():
            offsets.setdefault(topic, {}).update(parts)
    wms = [t.watermark_ms for t in tokens]
    known = [w for w in wms if w is not None]
    wm = min(known) if known and len(known) == len(wms) else None
    as_of = max((t.as_of_ms or 0 for t in tokens), default=0) or None
    return Token(offsets, wm, as_of)


class RemoteView:
    """The shape of a view whose workers all run in other processes (from their ``describe``):
    enough to route a query. It serves nothing here and has no change stream here."""

    def __init__(self, job: str, shape: dict, endpoint: str, end_offset, request, served):
        self.job_name, self.name, self.kind = job, shape["name"], shape["kind"]
        self.windowed, self.partitions = shape["windowed"], shape["partitions"]
        self.input_topics = set(shape["input_topics"])
        self.repartition_topics = list(shape["repartition_topics"])
        self.key_serde = _SERDES.get(shape["key_serde"] or "")
        self.end_offset, self._endpoint, self._request = end_offset, endpoint, request
        self._served_elsewhere = sorted(served)
        self._keys, self._as_of = shape["keys"], shape["as_of_ms"]

    def served(self) -> set[int]:
        return set()

    def partition_of(self, key: object) -> int:
        if self.key_serde is None:  # a serialiser of its own: the worker knows
            body = {"op": "partition", "job": self.job_name, "view": self.name, "key": key}
            return self._request(self._endpoint, body, 10.0)["partition"]
        data = self.key_serde.serialize(key)
        if data is None:
            raise InvalidConfig("key", key, "a view has no row for a null key")
        return partition_for_key(data, self.partitions)

    def info(self) -> ViewInfo:
        return ViewInfo(
            self.job_name,
            self.name,
            self.kind,
            self.windowed,
            self.partitions,
            [],
            self._keys,
            self._as_of,
            self._served_elsewhere,
        )


class RoutedViews:
    """``ViewQuery`` over the local runners and, for partitions they do not serve, the
    owning workers' endpoints. `owners(job)` gives partition → endpoint (e.g. from the job's
    group description: ``owners_from_group``)."""

    def __init__(
        self,
        log_store,
        owners: Callable[[str], dict[int, str]],
        *,
        jobs: Callable[[], list[str]] = list,
        request: Callable[[str, dict, float], dict] = ask,
    ):
        self.local = LocalViews(log_store)
        self.owners, self.jobs, self.request = owners, jobs, request

    def list_views(self) -> list[ViewInfo]:
        """This process's views (with the partitions other workers serve), then those of
        jobs whose workers all run elsewhere (`jobs()`: the jobs with advertised workers)."""
        out = []
        local_jobs = set()
        for info in self.local.list_views():
            local_jobs.add(info.job)
            elsewhere = sorted(set(self._owners_safe(info.job)) - set(info.served))
            out.append(dataclasses.replace(info, served_elsewhere=elsewhere))
        for job in sorted(set(self.jobs()) - local_jobs):
            try:
                out.extend(v.info() for v in self._remote_views(job).values())
            except TidelogError:
                continue  # its workers do not answer now: not listed
        return out

    def view(self, job: str, view: str) -> View:
        if job in self.local.registry.jobs():  # a worker of the job runs here: it knows
            return self.local.view(job, view)
        remote = self._remote_views(job)
        if view not in remote:
            have = ", ".join(sorted(remote)) or "none"
            raise UnknownView(f"job {job!r} has no view {view!r} (its views: {have})")
        return remote[view]  # type: ignore[return-value]

    def _owners_safe(self, job: str) -> dict[int, str]:
        try:
            return self.owners(job)
        except TidelogError:
            return {}

    def _remote_views(self, job: str) -> dict[str, RemoteView]:
        owners = self._owners_safe(job)
        if not owners:
            raise UnknownView(
                f"no job {job!r} runs in this process, nor a worker of it that advertises a "
                "query endpoint"
            )
        served: dict[str, list[int]] = {}
        for p, endpoint in owners.items():
            served.setdefault(endpoint, []).append(p)
        end_offset = self.local.registry.end_offset
        error: TidelogError | None = None
        for endpoint in sorted(served):
            try:
                shapes = self.request(endpoint, {"op": "describe", "job": job}, 10.0)["views"]
            except TidelogError as exc:
                error = exc
                continue
            return {
                sh["name"]: RemoteView(job, sh, endpoint, end_offset, self.request, owners)
                for sh in shapes
            }
        assert error is not None
        raise error

    def subscribe(self, job: str, view: str, callback):
        return self.local.subscribe(job, view, callback)  # the local partitions' changes

    def get(self, job: str, view: str, key: object, *, wait_for=None, timeout_s=0.0) -> Answer:
        v = self.view(job, view)
        if v.windowed:
            raise InvalidConfig("key", key, f"{view} is windowed: query by key and time")
        self._reflect(v, wait_for, timeout_s)
        p = v.partition_of(_key(key))
        if p in v.served():
            return v.get(key)
        return self._remote(v, p, {"op": "get", "key": key})

    def windows(self, job: str, view: str, key: object, *, wait_for=None, timeout_s=0.0, **kw):
        v = self.view(job, view)
        if not v.windowed:
            raise InvalidConfig("time_from", kw.get("time_from"), f"{view} is not windowed")
        _limit(kw.get("limit", MAX_ROWS))
        self._reflect(v, wait_for, timeout_s)
        p = v.partition_of(_key(key))
        if p in v.served():
            return v.windows(key, **kw)
        body = {"op": "windows", "key": key, "limit": kw.get("limit", MAX_ROWS)}
        body.update({k: kw.get(k) for k in ("time_from", "time_to")})
        return self._remote(v, p, body)

    def range(
        self,
        job: str,
        view: str,
        lo=None,
        hi=None,
        *,
        limit=MAX_ROWS,
        wait_for=None,
        timeout_s=0.0,
    ) -> Answer:
        _limit(limit)
        v = self.view(job, view)
        self._reflect(v, wait_for, timeout_s)
        local = sorted(v.served())
        answers = [v.range(lo, hi, limit=limit, partitions=local)] if local else []
        by_owner = self._owners_of(v, [p for p in range(v.partitions) if p not in local])
        for endpoint, ps in by_owner.items():
            body = {"op": "range", "lo": lo, "hi": hi, "limit": limit, "partitions": ps}
            answers.append(_answer_of(self._ask(v, endpoint, body, 10.0)))
        rows = sorted((kv for a in answers for kv in a.rows), key=lambda kv: order(kv[0]))
        truncated = len(rows) > limit or any(a.truncated for a in answers)
        return Answer(rows[:limit], merge_tokens([a.token for a in answers]), truncated)

    # ---------------------------------------------------------------- internals

    def _owners_of(self, v: View, partitions: list[int]) -> dict[str, list[int]]:
        if not partitions:
            return {}
        owners = self.owners(v.job_name)
        missing = [p for p in partitions if p not in owners]
        if missing:
            raise ViewUnavailable(
                f"partition{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} "
                f"of view {v.job_name}/{v.name}: no worker serves "
                f"{'them' if len(missing) > 1 else 'it'} here, and no worker that owns "
                f"{'them' if len(missing) > 1 else 'it'} advertises a query endpoint",
                missing,
            )
        out: dict[str, list[int]] = {}
        for p in partitions:
            out.setdefault(owners[p], []).append(p)
        return out

    def _ask(self, v: View, endpoint: str, body: dict, timeout_s: float) -> dict:
        return self.request(endpoint, {**body, "job": v.job_name, "view": v.name}, timeout_s)

    def _remote(self, v: View, p: int, body: dict) -> Answer:
        [(endpoint, _)] = self._owners_of(v, [p]).items()
        return _answer_of(self._ask(v, endpoint, body, 10.0))

    def _reflect(self, v: View, wait_for, timeout_s: float) -> None:
        """``wait_for`` in stages across owners (see the module docstring)."""
        if not wait_for:
            return
        targets = _parse_wait_for(wait_for)
        for topic, ps in targets.items():
            if topic not in v.input_topics:
                raise InvalidConfig(
                    "wait_for", topic, f"is not an input of view {v.job_name}/{v.name}"
                )
            for p in ps:
                if p >= v.partitions:
                    raise InvalidConfig("wait_for", f"{topic}:{p}", f"{topic} has no partition {p}")
        deadline = time.monotonic() + timeout_s
        self._wait_stage(v, targets, deadline)
        for topic in v.repartition_topics:
            ends = {topic: {q: v.end_offset(topic, q, deadline) for q in range(v.partitions)}}
            self._wait_stage(v, ends, deadline)

    def _wait_stage(self, v: View, targets: dict[str, dict[int, int]], deadline: float) -> None:
        served = v.served()
        by_owner: dict[str | None, dict[str, dict[int, int]]] = {}
        remote_ps = sorted({p for ps in targets.values() for p in ps if p not in served})
        owners = self._owners_of(v, remote_ps)
        where = {p: e for e, ps in owners.items() for p in ps}
        for topic, ps in targets.items():
            for p, o in ps.items():
                by_owner.setdefault(where.get(p), {}).setdefault(topic, {})[p] = o
        for endpoint, sub in by_owner.items():
            left = max(0.0, deadline - time.monotonic())
            if endpoint is None:
                v.wait_offsets(sub, left)
            else:
                body = {"op": "wait", "targets": sub, "timeout_s": left}
                self._ask(v, endpoint, body, left)
