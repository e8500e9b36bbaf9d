"""Queries and change streams of the tables running jobs maintain (``streams.jobs.views``), for
the console's view pages, the JSON API and the view WebSocket.

`view_source()` is the ``ViewQuery`` of this process: the jobs running embedded over the
broker's store (none on an external cluster, whose jobs run elsewhere). `view_read` parses a
query's parameters (the same for a page's form and the API) and answers it: by key, by key
range, or — for a windowed view — by key and window-start range, optionally waiting for input
offsets first (read-your-writes). Answers are plain JSON-able dicts.

Thread-safety: as the views (any thread; a read with ``wait_for`` blocks its thread).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from brokerui.cluster import is_external
from streams.errors import InvalidConfig, TidelogError, UnknownGroup
from streams.jobs.views import (
    ENDED,
    MAX_ROWS,
    MAX_WAIT_S,
    Answer,
    Changes,
    Snapshot,
    Token,
    View,
    ViewInfo,
    ViewQuery,
    ViewUnavailable,
)
from streams.jobs.viewserver import RoutedViews, owners_from_group

VIEW_EVENT = "view.changes"  # handled by ViewConsumer.view_changes


def view_source() -> ViewQuery | None:
    """The views of the jobs running here, each partition answered by the worker that owns
    it — this process's, or another worker of the job's group that advertises a query
    endpoint (``streams.jobs.viewserver``); None on an external cluster (no jobs run here)."""
    if is_external():
        return None
    from brokerui.broker import get_broker

    broker = get_broker()
    co = broker.coordinator
    return RoutedViews(
        broker.store, lambda job: _owners(co, job), jobs=lambda: _advertised_jobs(co)
    )


def _owners(coordinator, job: str) -> dict[int, str]:
    try:
        return owners_from_group(coordinator.describe_group(job))
    except UnknownGroup:
        return {}


def _advertised_jobs(coordinator) -> list[str]:
    """The groups with a member that advertises a view query endpoint: jobs' workers."""
    return [g for g, _ in coordinator.list_groups() if _owners(coordinator, g)]


def _source_or_none(source: ViewQuery | None) -> ViewQuery:
    if source is None:
        raise InvalidConfig(
            "cluster",
            "external",
            "the console works on an external cluster: its jobs' views are not in this process",
        )
    return source


def views_list(*, source: ViewQuery | None) -> list[dict]:
    """Every view of the jobs running here: job, name, kind, partitions served, rows, as of."""
    if source is None:
        return []
    return [info_dict(i) for i in source.list_views()]


def info_dict(info: ViewInfo) -> dict:
    return {
        "job": info.job,
        "view": info.name,
        "kind": info.kind,
        "windowed": info.windowed,
        "partitions": info.partitions,
        "served_partitions": info.served,
        "served_elsewhere": info.served_elsewhere,
        "rows": info.keys,
        "as_of_ms": info.as_of_ms,
    }


def view_info(*, source: ViewQuery | None, job: str, view: str) -> dict:
    return info_dict(_source_or_none(source).view(job, view).info())


class RowMasker(Protocol):
    """What hides fields of a topic's keys and values (``brokerui.access.masking.Masker``)."""

    def __bool__(self) -> bool: ...

    def decoded(self, part: str, obj: Any) -> Any: ...


MaskerFor = Callable[[str], RowMasker]  # topic -> the user's masking of it


def view_maskers(masker_for: MaskerFor | None, topics) -> list[RowMasker]:
    """The maskings of a view's input `topics` (its answers' consistency offsets name them):
    a view's keys and rows come from their keys and values, so the same fields are hidden."""
    if masker_for is None:
        return []
    return [m for m in (masker_for(t) for t in sorted(topics)) if m]


def masked_pair(key: Any, row: Any, maskers: list[RowMasker]) -> tuple[Any, Any]:
    for m in maskers:
        key, row = m.decoded("key", key), m.decoded("value", row)
    return key, row


def mask_message(message: dict, maskers: list[RowMasker]) -> dict:
    """A socket message (`snapshot_message`'s, `stream_messages`') with its rows masked."""
    if not maskers:
        return message
    if message.get("type") == "snapshot":
        rows = [list(masked_pair(k, r, maskers)) for k, r in message["rows"]]
        return {**message, "rows": rows}
    if message.get("type") == "changes":
        changes = [[t, d, *masked_pair(k, r, maskers)] for t, d, k, r in message["changes"]]
        return {**message, "changes": changes}
    return message


def view_read(
    *,
    source: ViewQuery | None,
    job: str,
    view: str,
    params: Mapping,
    masker_for: MaskerFor | None = None,
) -> dict:
    """Answer a query given as request parameters:

    - ``key`` (a string) or ``key_json`` (any JSON key): the row of that key — for a windowed
      view, its windows, with ``time_from`` / ``time_to`` (ms, inclusive, on the window start);
    - else a key range: ``from`` / ``to`` (strings) or ``from_json`` / ``to_json``, inclusive,
      either open; ``limit`` rows at most (default and maximum 1000);
    - ``wait_for``: ``topic:partition:offset,...`` — first wait until the view reflects every
      record of those input partitions below those offsets, at most ``timeout_ms`` (default
      5000, at most 60000).

    Returns ``{job, view, windowed, query, rows: [{key, row}], truncated, consistency:
    {offsets, watermark_ms, as_of_ms}}``; with `masker_for`, the fields the masking rules of
    the view's input topics hide are masked in keys and rows."""
    src = _source_or_none(source)
    v = src.view(job, view)
    q = parse_read(params)
    wait = {"wait_for": q["wait_for"], "timeout_s": q["timeout_s"]}
    if q["key"] is not _NONE:
        if v.windowed:
            ans = src.windows(
                job,
                view,
                q["key"],
                time_from=q["time_from"],
                time_to=q["time_to"],
                limit=q["limit"],
                **wait,
            )
        else:
            if q["time_from"] is not None or q["time_to"] is not None:
                raise InvalidConfig("time_from", q["time_from"], f"{view} is not windowed")
            ans = src.get(job, view, q["key"], **wait)
        kind = "key"
    else:
        ans = src.range(job, view, lo=q["from"], hi=q["to"], limit=q["limit"], **wait)
        kind = "range"
    maskers = view_maskers(masker_for, ans.token.offsets)
    if maskers:
        ans = dataclasses.replace(ans, rows=[masked_pair(k, r, maskers) for k, r in ans.rows])
    return {
        "job": job,
        "view": view,
        "windowed": v.windowed,
        "query": kind,
        **answer_dict(ans),
    }


def answer_dict(ans: Answer) -> dict:
    return {
        "rows": [{"key": k, "row": r} for k, r in ans.rows],
        "truncated": ans.truncated,
        "consistency": token_dict(ans.token),
    }


def token_dict(token: Token) -> dict:
    return token.to_dict()


_NONE = object()


def parse_read(params: Mapping) -> dict:
    """The query parameters of `view_read`, checked (InvalidConfig names the bad one)."""
    out: dict = {
        "key": _json_or_text(params, "key"),
        "from": _json_or_text(params, "from"),
        "to": _json_or_text(params, "to"),
        "time_from": _ms(params, "time_from"),
        "time_to": _ms(params, "time_to"),
        "limit": _int(params, "limit", MAX_ROWS, 1, MAX_ROWS),
        "wait_for": parse_wait_for(params.get("wait_for") or ""),
        "timeout_s": _int(params, "timeout_ms", 5000, 0, int(MAX_WAIT_S * 1000)) / 1000,
    }
    for name in ("from", "to"):
        if out[name] is _NONE:
            out[name] = None
    return out


def _json_or_text(params: Mapping, name: str) -> object:
    raw_json = params.get(f"{name}_json")
    raw = params.get(name)
    if raw_json not in (None, ""):
        try:
            return json.loads(raw_json)
        except ValueError as exc:
            raise InvalidConfig(f"{name}_json", raw_json, "is not JSON") from exc
    if raw in (None, ""):
        return _NONE
    return raw


def _ms(params: Mapping, name: str) -> int | None:
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except (TypeError, ValueError) as exc:
        raise InvalidConfig(name, raw, "must be a time in ms since the epoch") from exc


def _int(params: Mapping, name: str, default: int, lo: int, hi: int) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError) as exc:
        raise InvalidConfig(name, raw, f"must be a whole number in {lo}..{hi}") from exc
    if not lo <= value <= hi:
        raise InvalidConfig(name, raw, f"must be a whole number in {lo}..{hi}")
    return value


def parse_wait_for(text: str) -> dict[str, dict[int, int]] | None:
    """``"orders:2:18,orders:0:5"`` → ``{"orders": {2: 18, 0: 5}}`` (topic names have no
    colons); empty → None."""
    text = text.strip()
    if not text:
        return None
    out: dict[str, dict[int, int]] = {}
    for item in text.split(","):
        parts = item.strip().rsplit(":", 2)
        if len(parts) != 3 or not parts[0]:
            raise InvalidConfig(
                "wait_for", item, "must be topic:partition:offset (comma-separated)"
            )
        try:
            p, off = int(parts[1]), int(parts[2])
        except ValueError as exc:
            raise InvalidConfig(
                "wait_for", item, "partition and offset must be whole numbers"
            ) from exc
        if p < 0 or off < 0:
            raise InvalidConfig("wait_for", item, "partition and offset must be >= 0")
        out.setdefault(parts[0], {})[p] = off
    return out


# ------------------------------------------------------------------------------ streams


def view_group(job: str, view: str) -> str:
    """The Channels group of a view's change stream: ``live.view.<hash>``."""
    digest = hashlib.blake2b(f"{job}\0{view}".encode(), digest_size=12).hexdigest()
    return f"live.view.{digest}"


def view_stream(*, source: ViewQuery | None, job: str, view: str) -> View:
    """The view a WebSocket follows (its ``listen`` and ``snapshot``): one a worker of this
    process serves (ViewUnavailable for a view whose workers all run elsewhere)."""
    v = _source_or_none(source).view(job, view)
    if not isinstance(v, View):
        raise ViewUnavailable(
            f"view {job}/{view} is served by workers in other processes only: it can be "
            "queried here, but its live changes are not streamed to this console"
        )
    return v


def snapshot_message(snap: Snapshot) -> dict:
    """SUBSCRIBE's start: every row at `time` (as ``+1`` at that time), then the view is
    complete for times below `progress`."""
    return {
        "type": "snapshot",
        "time": snap.time,
        "rows": [[k, r] for k, r in snap.rows],
        "progress": snap.progress,
        "consistency": token_dict(snap.token),
    }


def changes_event(batch: Changes) -> dict:
    """A publish as a channel-layer event (plain data); ``ended`` when the job stopped."""
    if batch is ENDED:
        return {"type": VIEW_EVENT, "ended": True}
    return {
        "type": VIEW_EVENT,
        "time": batch.time,
        "changes": [[d, k, r] for d, k, r in batch.changes],
        "progress": batch.progress,
        "consistency": token_dict(batch.token),
    }


def stream_messages(event: dict, since: int) -> list[dict]:
    """What a socket that took its snapshot at `since` sends for a publish: its changes
    (``[time, diff, key, row]``, an update as -1 old row then +1 new row) if any, then a
    progress mark; nothing for a publish the snapshot already holds."""
    if event.get("ended"):
        return [
            {"type": "unavailable", "message": "The job stopped: this view is not kept any more."}
        ]
    if event["time"] <= since:
        return []
    out = []
    if event["changes"]:
        out.append(
            {
                "type": "changes",
                "time": event["time"],
                "changes": [[event["time"], d, k, r] for d, k, r in event["changes"]],
            }
        )
    out.append(
        {"type": "progress", "progress": event["progress"], "consistency": event["consistency"]}
    )
    return out


class ViewFanOut:
    """The relay's delivery: each publish of a view to its Channels group."""

    def __init__(self, group: str):
        self.group = group

    async def __call__(self, batch: Changes) -> None:
        from channels.layers import get_channel_layer

        await get_channel_layer().group_send(self.group, changes_event(batch))


QUERY_PARAMS = ("key", "key_json", "from", "to", "from_json", "to_json", "time_from", "time_to")


def view_page(
    *,
    source: ViewQuery | None,
    job: str,
    view: str,
    params: Mapping,
    masker_for: MaskerFor | None = None,
) -> dict:
    """A view's page: its ``info`` and, when the form asked something (any of
    `QUERY_PARAMS` or ``wait_for``), the ``result`` of `view_read` or the ``error`` it gave
    (a bad parameter, a timeout, an unserved partition: said, not raised). UnknownView when
    the job or view does not run here."""
    info = view_info(source=source, job=job, view=view)
    asked = any(params.get(p) for p in (*QUERY_PARAMS, "wait_for"))
    result = error = None
    if asked:
        try:
            result = view_read(
                source=source, job=job, view=view, params=params, masker_for=masker_for
            )
        except TidelogError as exc:
            error = str(exc)
    table = table_of(result["rows"], windowed=info["windowed"]) if result else None
    return {"info": info, "asked": asked, "result": result, "table": table, "error": error}


WINDOW_BOUNDS = ("start", "end")  # a windowed row's bounds: ms since the epoch, shown as UTC


def table_of(rows: list[dict], *, windowed: bool) -> dict:
    """Rows ``[{key, row}]`` as a table: ``columns`` (the rows' fields in first-seen order;
    a row that is not an object is one ``value`` column) and ``cells`` per row, each value
    as JSON text — but a windowed row's ``start`` and ``end`` as UTC times, their column
    named so; the key as JSON text (a windowed key is ``[key, start]``)."""
    columns: list[str] = []
    for r in rows:
        fields = r["row"].keys() if isinstance(r["row"], dict) else ["value"]
        columns.extend(c for c in fields if c not in columns)
    bounds = set(WINDOW_BOUNDS) if windowed else set()
    out = []
    for r in rows:
        row = r["row"] if isinstance(r["row"], dict) else {"value": r["row"]}
        cells = [_cell(row[c], c in bounds) if c in row else "" for c in columns]
        out.append({"key": json.dumps(r["key"]), "cells": cells})
    names = [f"{c} (UTC)" if c in bounds else c for c in columns]
    return {"columns": names, "rows": out}


def _cell(value: object, as_time: bool) -> str:
    if as_time and isinstance(value, int):
        when = datetime.fromtimestamp(value / 1000, UTC)
        return when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, float):  # sums of decimals: 824.9, not 824.9000000000001
        return format(value, ".12g")
    return json.dumps(value)
