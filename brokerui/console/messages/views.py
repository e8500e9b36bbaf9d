"""Message pages: the browser (bounded, cursor-paged scans), one record in full, and produce.

The browser runs one bounded scan per request (`BrowseRequest` budgets below). When a budget
stops a scan before the page is full, the page offers the next cursor: "continue scanning" as a
plain link, and with htmx an automatic continuation that appends the rows found and updates the
progress line until the page is full, the data ends or the user stops it.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_http_methods

from brokerui.access import services as access
from brokerui.audit.services import Actor, process_sink
from brokerui.cluster import get_cluster
from brokerui.console.messages import display, services
from brokerui.console.messages.forms import (
    FILTER_FIELDS,
    FILTER_OPS,
    PAGE_SIZES,
    READ_CHOICES,
    SEEK_CHOICES,
    BrowseForm,
    ProduceForm,
    resend_initial,
)
from brokerui.console.roles import operator_required
from brokerui.schemas import console_reading, subject_names, value_encoder
from streams.cluster import BrowseRequest, BrowseResult
from streams.cluster.browse import decode_cursor, encode_cursor
from streams.cluster.expressions import ExpressionError
from streams.cluster.transfer import FORMATS
from streams.errors import (
    OffsetOutOfRange,
    TidelogError,
    UnknownPartition,
    UnknownTopic,
)

# one request's scan budget; "continue scanning" carries on from the cursor
SCAN_RECORDS = 100_000
SCAN_BYTES = 32 << 20
SCAN_TIME_MS = 200
# the engine reads ahead up to 200 records per partition before its first budget check, so a
# budget below that makes no progress at all; give every partition room for two chunks
MIN_SCAN_PER_PARTITION = 400
MIN_TIME_PER_PARTITION_MS = 2
# automatic continuation stops (and leaves the button) after this much work in total
AUTO_MAX_RECORDS = 20_000_000
AUTO_MAX_MS = 60_000
# query parameters that belong to one scan, not to the query
_SCAN_PARAMS = (
    "cursor",
    "more",
    "have",
    "acc_records",
    "acc_bytes",
    "acc_ms",
    "acc_errors",
    "first_error",
    "in_range",
    "first_prev",
)


def _topic_or_404(cluster, topic: str):
    try:
        return cluster.describe_topic(topic)
    except UnknownTopic:
        raise Http404(f"Topic “{topic}” does not exist.") from None


def _reverse_or_none(name: str, *args) -> str | None:
    """A link to another area's page, if that area has it yet."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def _query(params, *, keep_cursor: bool = False, **changes) -> str:
    """The current query without the per-scan parameters, with `changes` applied."""
    drop = set(_SCAN_PARAMS) - ({"cursor"} if keep_cursor else set())
    pairs = [(k, v) for k in params for v in params.getlist(k) if k not in drop]
    pairs = [(k, v) for k, v in pairs if k not in changes]
    pairs += [(k, v) for k, v in changes.items() if v is not None]
    return "?" + urlencode(pairs)


# ================================================================================ browse


@dataclasses.dataclass(frozen=True)
class RecordRow:
    partition: int
    offset: int
    timestamp_ms: int
    key: display.Shown
    value: display.Shown
    headers: list[tuple[str, display.Shown]]
    size: int


def _row(r, mode: str, decoders) -> RecordRow:
    key_decoder, value_decoder = decoders
    return RecordRow(
        r.partition,
        r.offset,
        r.timestamp_ms,
        display.show_short(r.key, mode, key_decoder),
        display.show_value(r.value, mode, decoder=value_decoder),
        display.show_headers(r.headers, mode),
        r.size,
    )


@dataclasses.dataclass(frozen=True)
class Progress:
    """What this page's scans did, summed over continued requests."""

    records: int  # examined: walked past by the scans (not the read-ahead)
    bytes: int
    ms: float
    stopped: str
    complete: bool
    found: int
    in_range: int  # records from where the query started to the end of its range
    eval_errors: int
    eval_error: str | None

    @classmethod
    def of(cls, params, result: BrowseResult, more: bool) -> Progress:
        acc = (0, 0, 0.0, 0, None)
        if more:
            try:
                acc = (
                    int(params.get("acc_records", 0)),
                    int(params.get("acc_bytes", 0)),
                    float(params.get("acc_ms", 0)),
                    int(params.get("acc_errors", 0)),
                    int(params["in_range"]) if params.get("in_range") else None,
                )
            except ValueError:
                pass
        have = _int(params.get("have")) if more else 0
        return cls(
            acc[0] + result.examined,
            acc[1] + result.scanned_bytes,
            acc[2] + result.elapsed_ms,
            result.stopped,
            result.complete,
            have + len(result.records),
            acc[4] if acc[4] is not None else acc[0] + result.in_range,
            acc[3] + result.eval_errors,
            result.eval_error or (params.get("first_error") if more else None),
        )

    def reason(self, direction: str) -> str:
        if self.stopped == "page full":
            return "the page is full"
        if self.stopped == "end of data":
            return (
                "it reached the oldest record"
                if direction == "backward"
                else "it reached the newest record"
            )
        return f"it hit the {self.stopped}"


def _int(text, default: int = 0) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def _clamped_cursor(cursor: str, desc) -> str:
    """A cursor from the address bar, its positions held to each partition's offsets: the
    engine would walk an out-of-range backward position down one empty read at a time."""
    direction, positions = decode_cursor(cursor)
    bounds = {p.partition: (p.log_start_offset, p.end_offset) for p in desc.partitions}
    return encode_cursor(
        direction,
        {p: min(max(o, bounds[p][0]), bounds[p][1]) for p, o in positions.items() if p in bounds},
    )


def _range_problem(desc, form: BrowseForm) -> str | None:
    """An offset outside a chosen partition's range, said plainly (the engine would clamp)."""
    q = form.cleaned_data
    if q["seek"] != "offset" or q["cursor"]:
        return None
    offset = q["offset"]
    parts = desc.partitions if q["partition"] is None else [desc.partitions[q["partition"]]]
    if q["partition"] is not None:
        p = parts[0]
        if p.log_start_offset <= offset <= p.end_offset:
            return None
        if p.end_offset == p.log_start_offset:
            return (
                f"Offset {offset:,} is out of range: partition {p.partition} is empty "
                f"(its next offset is {p.end_offset:,})."
            )
        return (
            f"Offset {offset:,} is out of range for partition {p.partition}: it holds "
            f"offsets {p.log_start_offset:,}–{p.end_offset - 1:,}."
        )
    if all(offset >= p.end_offset for p in parts) and any(p.end_offset for p in parts):
        newest = max(p.end_offset for p in parts) - 1
        return f"Offset {offset:,} is past the end of every partition (newest offset {newest:,})."
    return None


def _browse_request(topic: str, form: BrowseForm, scanned: int, **changes) -> BrowseRequest:
    """The engine's request for a valid browse form; `scanned`: partitions it reads."""
    q = form.cleaned_data
    expression = form.expression
    if expression is not None:  # keys and values read with a schema are filtered decoded
        reading = console_reading()
        expression = expression.reading_with(reading.value(topic), reading.key(topic))
    return BrowseRequest(
        topic=topic,
        partition=q["partition"],
        seek=q["seek"],
        value=form.seek_value,
        filters=form.filters,
        expression=expression,
        max_scan_records=max(SCAN_RECORDS, MIN_SCAN_PER_PARTITION * scanned),
        max_scan_bytes=SCAN_BYTES,
        max_time_ms=max(SCAN_TIME_MS, MIN_TIME_PER_PARTITION_MS * scanned),
        committed=q.get("read") == "committed",
        **changes,
    )


def _export_links(params) -> list[tuple[str, str]] | None:
    if not services.export_enabled():
        return None
    return [(fmt.upper(), _query(params, format=fmt)) for fmt in FORMATS]


@require_GET
def browse_messages(request: HttpRequest, topic: str) -> HttpResponse:
    cluster = get_cluster()
    desc = _topic_or_404(cluster, topic)
    params = request.GET
    form = BrowseForm(params, partitions=len(desc.partitions))
    context = {
        "nav": "topics",
        "topic": topic,
        "desc": desc,
        "form": form,
        "seek_choices": SEEK_CHOICES,
        "read_choices": READ_CHOICES,
        "page_sizes": PAGE_SIZES,
        "filter_fields": FILTER_FIELDS,
        "filter_ops": FILTER_OPS,
        "modes": display.MODES,
        "topic_url": _reverse_or_none("console:topic", topic),
        "produce_url": reverse("console:produce", args=[topic]),
        "import_url": reverse("console:messages_import", args=[topic]),
        "export_url": reverse("console:messages_export", args=[topic]),
        "export_links": _export_links(params),
    }
    if not form.is_valid():
        return render(request, "console/messages/browse.html", context, status=400)
    problem = _range_problem(desc, form)
    if problem:
        form.add_error("offset", problem)
        return render(request, "console/messages/browse.html", context, status=400)
    q = form.cleaned_data
    masker = access.masker_for(request.user, topic)
    leak = _filter_on_masked(params, masker)
    if leak:
        form.add_error("q", leak)
        return render(request, "console/messages/browse.html", context, status=400)
    more = params.get("more") == "1"
    have = _int(params.get("have")) if more else 0
    scanned = len(desc.partitions) if q["partition"] is None else 1
    try:
        cursor = _clamped_cursor(q["cursor"], desc) if q["cursor"] else None
        result = cluster.browse(
            _browse_request(topic, form, scanned, page_size=max(1, q["size"] - have), cursor=cursor)
        )
    except ExpressionError as e:  # it names a function that does not exist
        form.expression_error = e
        form.add_error("q", str(e))
        return render(request, "console/messages/browse.html", context, status=400)
    except TidelogError as e:  # a malformed cursor, a partition removed meanwhile, ...
        form.add_error(None, str(e))
        return render(request, "console/messages/browse.html", context, status=400)
    context.update(_page_context(params, q, result, more, topic, masker))
    if q["markers"]:
        context["rows"], context["markers_problem"] = services.rows_with_markers(
            cluster=cluster,
            topic=topic,
            rows=context["rows"],
            newest_first=context["order"] == "desc",
        )
    if more and request.htmx:
        return render(request, "console/messages/partials/more.html", context)
    return render(request, "console/messages/browse.html", context)


TAIL_PAGE = 100  # records a live tail adds at most per step (the page keeps at most 500 rows)


@require_GET
def tail_messages(request: HttpRequest, topic: str) -> HttpResponse:
    """The live tail's next rows: the records the page's query selects that were written
    after ``after`` (a forward cursor; none: from now), as the page's rows, newest first when
    the page is; the next position in ``X-Tail-Cursor``, records passed over (the tail fell
    more than ``streams.cluster.tail.MAX_BEHIND`` behind) in ``X-Tail-Skipped``."""
    cluster = get_cluster()
    desc = _topic_or_404(cluster, topic)
    params = request.GET
    form = BrowseForm(params, partitions=len(desc.partitions))
    if not form.is_valid():
        return HttpResponse(_form_errors(form), status=400, content_type="text/plain")
    masker = access.masker_for(request.user, topic)
    leak = _filter_on_masked(params, masker)
    if leak:
        return HttpResponse(leak, status=400, content_type="text/plain")
    q = form.cleaned_data
    scanned = len(desc.partitions) if q["partition"] is None else 1
    try:
        step = services.tail_read(
            cluster=cluster,
            request=_browse_request(topic, form, scanned, page_size=TAIL_PAGE),
            after=params.get("after") or None,
        )
    except (ExpressionError, TidelogError) as e:  # a bad cursor or expression
        return HttpResponse(str(e), status=400, content_type="text/plain")
    records = list(step.result.records)  # oldest first
    if q["seek"] == "newest":
        records.reverse()
    reading = console_reading()
    records, decoders = _masked(records, masker, (reading.key(topic), reading.value(topic)))
    context = {"rows": [_row(r, q["view"], decoders) for r in records], "topic": topic,
               "view": q["view"]}  # fmt: skip
    response = render(request, "console/messages/partials/rows.html", context)
    response["X-Tail-Cursor"] = step.cursor
    response["X-Tail-Skipped"] = str(step.skipped)
    response["X-Tail-Count"] = str(len(records))
    return response


def _form_errors(form) -> str:
    return "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())


_FILTER_PARTS = {"value": "value", "key": "key", "header_key": "headers", "header_value": "headers"}


def _filter_on_masked(params, masker) -> str | None:
    """Why this query may not run for a user who sees `masker`'s fields masked: filtering on a
    masked field (by name in the expression, or on the bytes of a masked part) would tell its
    value by trying. None: it may."""
    if not masker:
        return None
    for field in params.getlist("field"):
        part = _FILTER_PARTS.get(field)
        if part and masker.masks(part) and any(t.strip() for t in params.getlist("text")):
            return f"Fields of the {part} are masked for you: filter on another part."
    expression = params.get("q", "")
    for name in masker.field_names() | {r.part for r in masker.rules if not r.fields}:
        if re.search(rf"\b{re.escape(name)}\b", expression):
            return f"The field {name} is masked for you: an expression may not name it."
    return None


def _masked(records, masker, decoders):
    """`records` as the user may see them, and the decoders of what is left unmasked (a masked
    part is JSON now)."""
    if not masker:
        return records, decoders
    records = [masker.record(r, *decoders) for r in records]
    key, value = decoders
    return records, (None if masker.masks("key") else key, None if masker.masks("value") else value)


def _page_context(params, q, result: BrowseResult, more: bool, topic: str, masker) -> dict:
    order = "desc" if q["seek"] == "newest" else "asc"
    forward = result.direction == "forward"
    records = list(result.records)
    flipped = forward != (order == "asc")
    if flipped:
        records.reverse()
    progress = Progress.of(params, result, more)
    reading = console_reading()
    records, decoders = _masked(records, masker, (reading.key(topic), reading.value(topic)))
    first_prev = (params.get("first_prev") or None) if more else result.prev_cursor
    # a forward scan continues to newer records and came from older ones; a backward one
    # the other way round
    older, newer = (first_prev, result.next_cursor) if forward else (result.next_cursor, first_prev)
    context = {
        "rows": [_row(r, q["view"], decoders) for r in records],
        "progress": progress,
        "reason": progress.reason(result.direction),
        "order": order,
        "swap": "afterbegin" if flipped else "beforeend",
        "older_url": _query(params, cursor=older) if older else None,
        "newer_url": _query(params, cursor=newer) if newer else None,
        "view": q["view"],
        "view_links": [(m, _query(params, keep_cursor=True, view=m)) for m in display.MODES],
        "more": more,
        "damaged": result.damaged,
        # the live tail's query (the page's) and, for a newest-first page, where it starts:
        # the ends this page was read from (none: from when the tail is switched on)
        "tail_query": _query(params, after=None),
        "tail_start": encode_cursor("forward", dict(result.start)) if not forward else "",
    }
    if not result.complete and result.next_cursor:
        auto = params.get("auto") == "1" or "seek" not in params
        context["more_link"] = _query(params, cursor=result.next_cursor)
        context["more_url"] = _query(
            params,
            cursor=result.next_cursor,
            more="1",
            have=str(progress.found),
            acc_records=str(progress.records),
            acc_bytes=str(progress.bytes),
            acc_ms=f"{progress.ms:.1f}",
            acc_errors=str(progress.eval_errors) if progress.eval_errors else None,
            in_range=str(progress.in_range),
            first_error=progress.eval_error,
            first_prev=first_prev,
        )
        context["auto_continue"] = (
            auto and progress.records < AUTO_MAX_RECORDS and progress.ms < AUTO_MAX_MS
        )
    return context


# ================================================================================ one record


def _read_one(cluster, topic: str, partition: int, offset: int):
    """The record at exactly `offset`, or a sentence saying why there is none."""
    try:
        recs = cluster.read(topic=topic, partition=partition, offset=offset, max_records=1)
    except (UnknownPartition, OffsetOutOfRange) as e:
        return None, str(e)[:1].upper() + str(e)[1:] + "."
    if not recs or recs[0].offset != offset:
        return None, (
            f"There is no record at offset {offset:,} of partition {partition} "
            "(compaction may have removed it)."
        )
    return recs[0], None


@require_GET
def record_detail(request: HttpRequest, topic: str, partition: int, offset: int) -> HttpResponse:
    """One record in full: the value's "show all" (htmx) or a page of its own."""
    cluster = get_cluster()
    _topic_or_404(cluster, topic)
    mode = request.GET.get("view", "auto")
    if mode not in display.MODES:
        mode = "auto"
    rec, problem = _read_one(cluster, topic, partition, offset)
    context = {
        "nav": "topics",
        "topic": topic,
        "topic_url": _reverse_or_none("console:topic", topic),
        "partition": partition,
        "offset": offset,
        "problem": problem,
        "view": mode,
        "record": rec,
    }
    if rec is not None:
        reading = console_reading()
        masker = access.masker_for(request.user, topic)
        (rec,), (key_decoder, value_decoder) = _masked(
            [rec], masker, (reading.key(topic), reading.value(topic))
        )
        context["record"] = rec
        context["value"] = display.show_value(rec.value, mode, limit=None, decoder=value_decoder)
        context["key"] = display.show_value(rec.key, mode, limit=None, decoder=key_decoder)
        context["headers"] = display.show_headers(rec.headers, mode, short=False)
        context["size"] = (
            len(rec.key or b"")
            + len(rec.value or b"")
            + sum(len(k) + len(v or b"") for k, v in rec.headers)
        )
    if request.htmx:
        # the swap target is the value cell; a problem is shown there too, not dropped
        return render(request, "console/messages/partials/full_value.html", context)
    status = 404 if problem else 200
    return render(request, "console/messages/record.html", context, status=status)


# ================================================================================ produce


def _prefill(cluster, params) -> tuple[dict, list[str], str | None]:
    """Initial produce form data copied from a shown record ("re-send"), notes, a problem."""
    source = params.get("from_topic", "")
    partition, offset = _int(params.get("from_partition"), -1), _int(params.get("from_offset"), -1)
    if partition < 0 or offset < 0:
        return {}, [], "Re-send needs the record's partition and offset."
    try:
        cluster.describe_topic(source)
    except UnknownTopic:
        return {}, [], f"Topic “{source}” does not exist."
    rec, problem = _read_one(cluster, source, partition, offset)
    if rec is None:
        return {}, [], problem
    initial, notes = resend_initial(rec)
    notes.insert(0, f"Copied from {source} partition {partition} at offset {offset:,}.")
    return initial, notes, None


def _too_large(form: ProduceForm, limit: int) -> str | None:
    for i, r in enumerate(form.records, 1):
        size = services.batch_size(r)
        if size > limit:
            which = "The message" if len(form.records) == 1 else f"Message {i}"
            return (
                f"{which} is {size:,} bytes as a record batch; this topic accepts at most "
                f"{limit:,} (max.message.bytes). Nothing was sent."
            )
    return None


@require_http_methods(["GET", "POST"])
@operator_required
def produce(request: HttpRequest, topic: str) -> HttpResponse:
    cluster = get_cluster()
    _topic_or_404(cluster, topic)
    topics = {t.name: t.partitions for t in cluster.list_topics()}
    context = {
        "nav": "topics",
        "topic": topic,
        "topic_url": _reverse_or_none("console:topic", topic),
        "browse_url": reverse("console:messages", args=[topic]),
        "subjects": subject_names(),
    }
    if cluster.is_internal(topic):
        context["refused"] = (
            f"“{topic}” is an internal topic, written by Tidelog itself; "
            "producing to it is refused."
        )
        return render(request, "console/messages/produce.html", context, status=403)
    status = 200
    if request.method == "GET":
        initial, notes, problem = {"topic": topic}, [], None
        if "from_offset" in request.GET:
            prefill, notes, problem = _prefill(cluster, request.GET)
            initial.update(prefill)
            status = 404 if problem else 200
        form = ProduceForm(initial=initial, topics=topics)
        context.update(form=form, notes=notes, problem=problem)
        return render(request, "console/messages/produce.html", context, status=status)

    form = ProduceForm(request.POST, topics=topics, value_encoder=value_encoder)
    context["form"] = form
    if not form.is_valid():
        return render(request, "console/messages/produce.html", context, status=400)
    target = form.cleaned_data["topic"]
    limit = int(cluster.describe_topic(target).config["max.message.bytes"])
    problem = _too_large(form, limit)
    if problem:
        form.add_error("value", problem)
        return render(request, "console/messages/produce.html", context, status=400)
    produced = services.records_produce(
        cluster=cluster,
        sink=process_sink(),
        actor=Actor(request.user),
        topic=target,
        records=list(form.records),
    )
    results, error = produced.results, None
    if produced.error is not None:  # RecordTooLarge near the limit, a topic deleted meanwhile
        error = f"Message {len(results) + 1} was refused: {produced.error}."
    if error:
        sent = f"{len(results):,} message(s) were written before that. " if results else ""
        form.add_error(None, error + " " + sent)
        status = 400
    context.update(
        results=results[:100],
        result_count=len(results),
        target=target,
        summary=services.partition_summary(results),
        target_browse_url=reverse("console:messages", args=[target]),
    )
    return render(request, "console/messages/produce.html", context, status=status)


# ================================================================================ export


def _query_record(form: BrowseForm) -> dict:
    """The query as typed, as the export file and the audit log record it."""
    q = form.cleaned_data
    return {
        "expression": q["q"] or None,
        "filters": [dataclasses.asdict(f) for f in form.filters],
        "partition": q["partition"],
        "start": q["seek"],
        "start_value": form.seek_value,
    }


def _streamed(
    request: HttpRequest, chunks: Iterator[bytes]
) -> Iterator[bytes] | AsyncIterator[bytes]:
    """`chunks` as the server can stream them: under ASGI (Daphne) an async iterator that pulls
    one piece at a time (given a sync one, Django would read it whole into memory first)."""
    if not isinstance(request, ASGIRequest):
        return chunks
    step = sync_to_async(lambda: next(chunks, None), thread_sensitive=True)

    async def pieces() -> AsyncIterator[bytes]:
        while (piece := await step()) is not None:
            yield piece

    return pieces()


@require_GET
def export_messages(request: HttpRequest, topic: str) -> HttpResponse:
    """What the browse query selects, as a JSON Lines or CSV download, streamed."""
    cluster = get_cluster()
    desc = _topic_or_404(cluster, topic)
    fmt = request.GET.get("format", "jsonl")
    if not services.export_enabled():
        raise PermissionDenied(str(services.ExportDisabled()).capitalize() + ".")
    form = BrowseForm(request.GET, partitions=len(desc.partitions))
    if fmt not in FORMATS or not form.is_valid():
        problem = (
            f"Unknown export format “{fmt}”: use {' or '.join(FORMATS)}."
            if fmt not in FORMATS
            else "; ".join(str(e) for errs in form.errors.values() for e in errs)
        )
        return HttpResponse(problem, status=400, content_type="text/plain; charset=utf-8")
    scanned = len(desc.partitions) if form.cleaned_data["partition"] is None else 1
    masker = access.masker_for(request.user, topic)
    leak = _filter_on_masked(request.GET, masker)
    if leak:
        return HttpResponse(leak, status=400, content_type="text/plain; charset=utf-8")
    try:
        export = services.records_export(
            cluster=cluster,
            sink=process_sink(),
            actor=Actor(request.user),
            request=_browse_request(topic, form, scanned),
            query=_query_record(form),
            fmt=fmt,
            reading=console_reading(),
            masker=masker,
        )
    except TidelogError as e:  # an unknown function in the expression, ...
        return HttpResponse(str(e), status=400, content_type="text/plain; charset=utf-8")
    response = StreamingHttpResponse(
        _streamed(request, export.chunks), content_type=export.content_type
    )
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    response["X-Tidelog-Export-Range"] = ",".join(
        f"{r['partition']}:{r['from']}-{r['to']}" for r in export.run.range
    )
    return response


# ================================================================================ import

PREVIEW_RECORDS = 20
IMPORT_MAX_BYTES = 64 << 20  # a file is checked whole (in memory) before anything is written
PENDING_MAX_AGE_S = 3600  # previewed files not confirmed within this are removed
_IMPORTS_KEY = "message_imports"


def _import_dir() -> Path:
    """Where previewed files wait for their confirmation; older ones than PENDING_MAX_AGE_S
    are removed."""
    path = Path(settings.TIDELOG_DATA_DIR) / "imports"
    path.mkdir(mode=0o700, exist_ok=True)
    cutoff = time.time() - PENDING_MAX_AGE_S
    for old in path.glob("*.jsonl"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except FileNotFoundError:  # removed meanwhile by another request
            pass
    return path


def _preview_rows(parsed, keep: bool) -> list[dict]:
    return [
        {
            "line": r.line,
            "partition": r.partition if keep else None,
            "timestamp_ms": r.timestamp_ms,
            "key": display.show_short(r.key),
            "value": display.show_short(r.value),
            "headers": display.show_headers(r.headers),
        }
        for r in parsed.records[:PREVIEW_RECORDS]
    ]


@require_http_methods(["GET", "POST"])
@operator_required
def import_messages(request: HttpRequest, topic: str) -> HttpResponse:
    """Import a JSON Lines file into the topic: upload → preview (count and first records, or
    every bad line) → confirm. Nothing is written before the confirmation, nor from a file
    with a bad line."""
    cluster = get_cluster()
    _topic_or_404(cluster, topic)
    context: dict = {
        "nav": "topics",
        "topic": topic,
        "topic_url": _reverse_or_none("console:topic", topic),
        "browse_url": reverse("console:messages", args=[topic]),
        "keep_partitions": True,
    }
    template = "console/messages/import.html"
    if cluster.is_internal(topic):
        context["refused"] = f"“{topic}” is an internal topic; importing into it is refused."
        return render(request, template, context, status=403)
    if request.method == "GET":
        return render(request, template, context)
    pending = request.session.get(_IMPORTS_KEY, {})
    token = request.POST.get("token", "")
    if token:  # confirm or cancel a previewed file
        entry = pending.pop(token, None)
        request.session[_IMPORTS_KEY] = pending
        path = _import_dir() / f"{token}.jsonl"
        if entry is None or entry["topic"] != topic or not path.exists():
            context["problem"] = "This preview is no longer pending: upload the file again."
            return render(request, template, context, status=400)
        data = path.read_bytes()
        path.unlink()
        if request.POST.get("action") != "confirm":
            context["notice"] = f"Import of {entry['filename']} cancelled; nothing was written."
            return render(request, template, context)
        done = services.records_import(
            cluster=cluster,
            sink=process_sink(),
            actor=Actor(request.user),
            topic=topic,
            data=data,
            filename=entry["filename"],
            keep_partitions=entry["keep"],
        )
        context.update(imported=done, filename=entry["filename"])
        if done.produced is None:  # the topic changed since the preview
            context["errors"] = done.parsed.errors
            return render(request, template, context, status=400)
        context["summary"] = services.partition_summary(done.produced.results)
        if done.produced.error is not None:
            return render(request, template, context, status=400)
        return render(request, template, context)

    upload = request.FILES.get("file")
    keep = request.POST.get("keep_partitions") == "1"
    context["keep_partitions"] = keep
    if upload is None:
        context["problem"] = "Choose a JSON Lines file (.jsonl) to import."
        return render(request, template, context, status=400)
    if upload.size > IMPORT_MAX_BYTES:
        context["problem"] = (
            f"{upload.name} is {upload.size:,} bytes; an import takes at most "
            f"{IMPORT_MAX_BYTES:,} bytes ({IMPORT_MAX_BYTES >> 20} MiB). Split it into parts "
            "(whole lines); nothing was written."
        )
        return render(request, template, context, status=400)
    data = upload.read()
    parsed = services.records_import_check(
        cluster=cluster, topic=topic, data=data, keep_partitions=keep
    )
    context.update(parsed=parsed, filename=upload.name)
    if not parsed.ok:
        context["errors"] = parsed.errors
        return render(request, template, context, status=400)
    token = secrets.token_hex(16)
    (_import_dir() / f"{token}.jsonl").write_bytes(data)
    pending[token] = {"topic": topic, "filename": upload.name, "keep": keep}
    request.session[_IMPORTS_KEY] = pending
    stamps = [r.timestamp_ms for r in parsed.records if r.timestamp_ms is not None]
    context.update(
        token=token,
        rows=_preview_rows(parsed, keep),
        count=len(parsed.records),
        first_ts=min(stamps, default=None),
        last_ts=max(stamps, default=None),
        meta=parsed.meta,
    )
    return render(request, template, context)
