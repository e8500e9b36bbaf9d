"""A panel's field paths checked against a sample of its topic's records, before it is saved.

`sample_values` reads the newest ``SAMPLE_SIZE`` record values of a topic (over all its
partitions, newest by timestamp) from a ``RecordSource``; `check_sample` reads them as the job
would (``spec._Parser``'s rules: JSON documents, a number for the aggregated field, epoch
milliseconds or ISO 8601 for the time field) and returns one `FieldProblem` per field that does
not fit some of them, with the reason in words ("field 'amount' missing in 7 of 20 sampled
records"). A problem is ``fatal`` when no sampled record fits: such a panel would draw nothing.

Pure functions over what they are given; thread-safe.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import NamedTuple

from streams.processing.panels.source import RecordSource
from streams.processing.panels.spec import (
    _MISSING,
    PanelSpec,
    ValueDecoder,
    _number,
    extract,
    parse_time,
    read_document,
)

SAMPLE_SIZE = 20
MAX_KEYS_SHOWN = 12


class FieldProblem(NamedTuple):
    """Why some sampled records do not fit one field of a spec."""

    field: str  # the spec field: value_field, group_by, time_field, or topic (not JSON)
    bad: int  # sampled records that do not fit
    sampled: int  # records it was checked against
    reason: str  # the whole explanation, for people
    fatal: bool  # no sampled record fits


def sample_values(source: RecordSource, topic: str, size: int = SAMPLE_SIZE) -> list[bytes | None]:
    """The values of (at most) the `size` newest records of `topic`, oldest first."""
    records = []
    for p in range(source.partition_count(topic)):
        start, end = source.offsets(topic, p)
        offset = max(start, end - size)
        if offset < end:
            records += source.read(topic, p, offset, max_records=size)[-size:]
    records.sort(key=lambda r: r.timestamp_ms)
    return [r.value for r in records[-size:]]


def check_sample(
    spec: PanelSpec, values: Sequence[bytes | None], decoder: ValueDecoder | None = None
) -> list[FieldProblem]:
    """The problems of `spec`'s field paths with these record values (none: all fit, or there
    was nothing to check); with a `decoder`, values in the schema registry's wire format are
    read decoded."""
    docs, not_json = [], 0
    for raw in values:
        doc = read_document(raw, decoder)
        if doc is _MISSING:
            not_json += 1
        else:
            docs.append(doc)
    problems = []
    if not_json:
        problems.append(
            FieldProblem(
                "topic",
                not_json,
                len(values),
                f"{not_json} of {len(values)} sampled records are not JSON documents "
                "(they would be counted as unreadable and skipped)",
                not docs,
            )
        )
    if not docs:
        return problems
    of = f"of {len(docs)} sampled{' JSON' if not_json else ''} records"
    checks = []
    if spec.aggregation != "count" and spec.value_field:
        checks.append(("value_field", spec.value_field, "a number", _number))
    if spec.group_by:
        checks.append(("group_by", spec.group_by, None, None))
    if spec.time_field:
        checks.append(("time_field", spec.time_field, "a time (epoch ms or ISO 8601)", parse_time))
    for field, path, kind, convert in checks:
        problem = _check_path(field, path, kind, convert, docs, of)
        if problem is not None:
            problems.append(problem)
    return problems


def _check_path(field, path, kind, convert, docs, of) -> FieldProblem | None:
    missing, wrong, example, seen = 0, 0, None, set()
    for doc in docs:
        value = extract(doc, path)
        if value is _MISSING:
            missing += 1
            seen.update(_keys_where_it_stops(doc, path))
        elif convert is not None and convert(value) is None:
            wrong += 1
            if example is None:
                example = value
    if not missing and not wrong:
        return None
    parts = []
    if missing:
        parts.append(f"field '{path}' missing in {missing} {of}")
    if wrong:
        shown = json.dumps(example)
        shown = shown if len(shown) <= 40 else shown[:37] + "…"
        parts.append(f"'{path}' is not {kind} in {wrong} {of} (e.g. {shown})")
    reason = "; ".join(parts)
    if missing and seen:
        names = sorted(seen)
        more = len(names) - MAX_KEYS_SHOWN
        listed = ", ".join(names[:MAX_KEYS_SHOWN]) + (f" and {more} more" if more > 0 else "")
        reason += f"; fields there: {listed}"
    bad = missing + wrong
    return FieldProblem(field, bad, len(docs), reason, bad == len(docs))


def _keys_where_it_stops(doc: object, path: str) -> list[str]:
    """The keys of the deepest object on `path` that is there (for a missing field: which
    fields there are instead)."""
    parts = path.split(".")
    for depth in range(len(parts) - 1, -1, -1):
        parent = extract(doc, ".".join(parts[:depth])) if depth else doc
        if parent is not _MISSING:
            return [str(k) for k in parent] if isinstance(parent, dict) else []
    return []
