"""Message browsing: bounded, filterable scans over one partition or all of them.

A browse reads pages of records starting from a seek position, in either direction:

    oldest           forward from each partition's log start
    offset N         forward from N (one partition) or from N in every partition
    timestamp T      forward from the first offset with timestamp >= T in each partition
    newest           backward from each partition's end: newest first
    newest-N         forward from (end - N) in each partition: the last N, oldest first

Across partitions the pages are merged by timestamp (forward: oldest first; backward: newest
first), the most requested browse mode in every Kafka console. Filters (contains, not contains,
equals) apply to the key, the value, header keys or header values.

Every scan is bounded by a page size, a number of scanned records, a byte budget and a time
budget; the result says what was scanned, why it stopped and carries cursors for the next and
previous pages. Cursors are plain strings (``f:0=120,1=55``: direction and per-partition
positions), so a page link can be bookmarked.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Callable, Iterator

from streams.cluster.expressions import RecordPredicate
from streams.errors import InvalidRecord, LogDamaged, OffsetOutOfRange, UnknownPartition
from streams.log import Record
from streams.log.reader import LogReader

FIELDS = ("key", "value", "header_key", "header_value")
OPS = ("contains", "not_contains", "equals")
SEEKS = ("oldest", "newest", "newest-n", "offset", "timestamp")
CHUNK = 200


@dataclasses.dataclass(frozen=True)
class Filter:
    field: str
    op: str
    text: str

    def __post_init__(self) -> None:
        if self.field not in FIELDS:
            raise InvalidRecord(f"unknown filter field {self.field!r}; use one of {FIELDS}")
        if self.op not in OPS:
            raise InvalidRecord(f"unknown filter operator {self.op!r}; use one of {OPS}")

    def matches(self, r: Record) -> bool:
        needle = self.text.encode()
        if self.field == "key":
            hay = [r.key or b""]
        elif self.field == "value":
            hay = [r.value or b""]
        elif self.field == "header_key":
            hay = [k.encode() for k, _ in r.headers]
        else:
            hay = [v or b"" for _, v in r.headers]
        if self.op == "equals":
            return any(h == needle for h in hay)
        found = any(needle in h for h in hay)
        return found if self.op == "contains" else not found


@dataclasses.dataclass(frozen=True)
class BrowseRequest:
    topic: str
    partition: int | None = None  # None: all partitions
    seek: str = "newest"
    value: int | None = None  # N for newest-n, the offset, or the timestamp in ms
    filters: tuple[Filter, ...] = ()
    expression: RecordPredicate | None = None  # compiled once, evaluated per record
    page_size: int = 50
    cursor: str | None = None
    max_scan_records: int = 200_000
    max_scan_bytes: int = 64 << 20
    max_time_ms: int = 2_000
    # ((partition, end offset), ...): read no further than these (an export's snapshot)
    until: tuple[tuple[int, int], ...] = ()
    # read_committed: up to each partition's last stable offset, without aborted records (the
    # cluster answers it: ``LocalCluster.browse`` reads through `CommittedReader`)
    committed: bool = False

    def __post_init__(self) -> None:
        if self.seek not in SEEKS:
            raise InvalidRecord(f"unknown seek {self.seek!r}; use one of {', '.join(SEEKS)}")
        if self.seek in ("newest-n", "offset", "timestamp") and self.value is None:
            raise InvalidRecord(f"seek {self.seek} needs a value")
        if not 1 <= self.page_size <= 1000:
            raise InvalidRecord("page size must be between 1 and 1000")


class CommittedReader:
    """A `LogReader` over a ``LogStore`` as a read_committed consumer sees it: each partition
    ends at its last stable offset, and aborted transactions' records are left out."""

    def __init__(self, store) -> None:
        self.store = store

    def list_topics(self, include_internal: bool = False, /) -> list[str]:
        return self.store.list_topics(include_internal)

    def partition_count(self, topic: str, /) -> int:
        return self.store.partition_count(topic)

    def offsets(self, topic: str, partition: int, /) -> tuple[int, int]:
        return self.store.offsets(topic, partition, committed=True)

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int, /) -> int | None:
        return self.store.offset_for_timestamp(topic, partition, timestamp_ms)

    def read(self, topic: str, partition: int, offset: int, /, max_records: int = 500):
        return self.store.read(topic, partition, offset, max_records=max_records, committed=True)


@dataclasses.dataclass(frozen=True)
class BrowsedRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple

    def with_parts(self, key: bytes | None, value: bytes | None, headers: tuple) -> BrowsedRecord:
        """This record with other key, value and headers (a masked copy). Made without
        ``__init__``, which sets each field of a frozen dataclass through
        ``object.__setattr__``: half of what masking a record cost."""
        new = object.__new__(BrowsedRecord)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields["key"], fields["value"], fields["headers"] = key, value, headers
        return new

    @property
    def size(self) -> int:
        """Payload bytes: key + value + headers."""
        n = len(self.key or b"") + len(self.value or b"")
        return n + sum(len(k) + len(v or b"") for k, v in self.headers)


@dataclasses.dataclass(frozen=True)
class BrowseResult:
    records: list[BrowsedRecord]
    scanned_records: int
    scanned_bytes: int
    elapsed_ms: float
    stopped: str  # "page full", "end of data", or which budget ran out
    next_cursor: str | None
    prev_cursor: str | None
    direction: str  # "forward" (oldest first) or "backward" (newest first)
    # damaged ranges of the log the scan stepped over: (partition, first offset, end offset)
    damaged: tuple[tuple[int, int, int], ...] = ()
    # records between this scan's start positions and the end of the range in its direction:
    # what a scan without budgets would have examined ("scanned X of Y")
    in_range: int = 0
    examined: int = 0  # records of the range walked past (scanned_records includes read-ahead)
    start: tuple[tuple[int, int], ...] = ()  # (partition, position) this scan started from
    # records the expression could not be evaluated on (they did not match), and the first why
    eval_errors: int = 0
    eval_error: str | None = None

    @property
    def complete(self) -> bool:
        return self.stopped in ("page full", "end of data")


def encode_cursor(direction: str, positions: dict[int, int]) -> str:
    return f"{direction[0]}:" + ",".join(f"{p}={o}" for p, o in sorted(positions.items()))


def decode_cursor(cursor: str) -> tuple[str, dict[int, int]]:
    try:
        d, _, rest = cursor.partition(":")
        direction = {"f": "forward", "b": "backward"}[d]
        positions = {}
        for part in filter(None, rest.split(",")):
            p, _, o = part.partition("=")
            positions[int(p)] = int(o)
        return direction, positions
    except (KeyError, ValueError):
        raise InvalidRecord(f"malformed page cursor {cursor!r}") from None


def browse(
    store: LogReader, req: BrowseRequest, clock: Callable[[], float] = time.monotonic
) -> BrowseResult:
    """Run one bounded page of a browse; see the module docstring. `store`: a LogStore, or a
    ``kafka_io.ClusterView`` over a cluster (see ``LogReader``)."""
    started = clock()
    count = store.partition_count(req.topic)  # UnknownTopic early
    if req.partition is not None and not 0 <= req.partition < count:
        raise UnknownPartition(req.topic, req.partition, count)
    partitions = [req.partition] if req.partition is not None else list(range(count))
    bounds = {p: store.offsets(req.topic, p) for p in partitions}
    if req.until:
        until = dict(req.until)
        bounds = {p: (lo, min(hi, max(lo, until.get(p, hi)))) for p, (lo, hi) in bounds.items()}
    if req.cursor:
        direction, positions = decode_cursor(req.cursor)
        # a cursor is user input (it travels in URLs): keep it inside each partition's range
        positions = {
            p: min(max(o, bounds[p][0]), bounds[p][1]) for p, o in positions.items() if p in bounds
        }
    else:
        direction, positions = _start_positions(store, req, bounds)
    scan = _Scan(store, req, bounds, started, clock)
    if direction == "forward":
        records, stopped, after = scan.forward(positions)
    else:
        records, stopped, after = scan.backward(positions)
    return _result(req, records, scan, stopped, direction, positions, after, bounds, clock)


def _result(req, records, scan, stopped, direction, before, after, bounds, clock):
    if direction == "forward":
        in_range = sum(max(0, bounds[p][1] - o) for p, o in before.items())
        more = any(after[p] < bounds[p][1] for p in after)
        next_cursor = encode_cursor("forward", after) if more else None
        prev_cursor = (
            encode_cursor("backward", before)
            if any(before[p] > bounds[p][0] for p in before)
            else None
        )
    else:
        in_range = sum(max(0, o - bounds[p][0]) for p, o in before.items())
        more = any(after[p] > bounds[p][0] for p in after)
        next_cursor = encode_cursor("backward", after) if more else None
        prev_cursor = (
            encode_cursor("forward", before)
            if any(before[p] < bounds[p][1] for p in before)
            else None
        )
    return BrowseResult(
        records=[
            BrowsedRecord(req.topic, p, r.offset, r.timestamp_ms, r.key, r.value, r.headers)
            for p, r in records
        ],
        scanned_records=scan.records,
        scanned_bytes=scan.bytes,
        elapsed_ms=(clock() - scan.started) * 1000,
        stopped=stopped,
        next_cursor=next_cursor,
        prev_cursor=prev_cursor,
        direction=direction,
        damaged=tuple(sorted(scan.damaged)),
        in_range=in_range,
        examined=scan.examined,
        start=tuple(sorted(before.items())),
        eval_errors=req.expression.errors if req.expression else 0,
        eval_error=req.expression.first_error if req.expression else None,
    )


def _start_positions(store, req: BrowseRequest, bounds) -> tuple[str, dict[int, int]]:
    if req.seek == "newest":
        return "backward", {p: end for p, (_, end) in bounds.items()}
    positions = {}
    value = req.value if req.value is not None else 0  # set for these seeks (__post_init__)
    for p, (start, end) in bounds.items():
        if req.seek == "oldest":
            positions[p] = start
        elif req.seek == "newest-n":
            positions[p] = max(start, end - max(0, value))
        elif req.seek == "offset":
            positions[p] = min(max(value, start), end)
        else:
            found = store.offset_for_timestamp(req.topic, p, value)
            positions[p] = end if found is None else found
    return "forward", positions


class _Scan:
    """Reads records partition by partition in chunks, counting what it scanned."""

    def __init__(self, store, req: BrowseRequest, bounds, started: float, clock):
        self.store, self.req, self.bounds = store, req, bounds
        self.started, self.clock = started, clock
        self.records = 0
        self.bytes = 0
        self.examined = 0  # records the page walked past (read-ahead not counted)
        self.damaged: set[tuple[int, int, int]] = set()  # (partition, first, end) stepped over

    def _budget_left(self) -> str | None:
        req = self.req
        if self.records >= req.max_scan_records:
            return f"scan limit of {req.max_scan_records:,} records"
        if self.bytes >= req.max_scan_bytes:
            return f"scan limit of {req.max_scan_bytes // (1 << 20)} MB"
        if (self.clock() - self.started) * 1000 >= req.max_time_ms:
            return f"time limit of {req.max_time_ms} ms"
        return None

    def _count(self, recs: list[Record]) -> None:
        self.records += len(recs)
        self.bytes += sum(len(r.value or b"") + len(r.key or b"") for r in recs)

    def _read(self, p: int, offset: int, n: int) -> list[Record]:
        """Records from `offset`; a damaged range of the log is stepped over (and noted)."""
        while offset < self.bounds[p][1]:
            try:
                return self.store.read(self.req.topic, p, offset, max_records=n)
            except OffsetOutOfRange:
                return []
            except LogDamaged as exc:
                self.damaged.add((p, exc.first_offset, exc.end_offset))
                offset = max(exc.end_offset, offset + 1)
        return []

    def _read_range(self, p: int, lo: int, upper: int) -> list[Record]:
        """Every record in [lo, upper): a read stops early before damage (or at its size
        limit), so read on from where it stopped."""
        out: list[Record] = []
        while lo < upper:
            recs = [r for r in self._read(p, lo, upper - lo) if r.offset < upper]
            if not recs:
                break
            out += recs
            lo = recs[-1].offset + 1
        return out

    def _forward_iter(self, p: int, offset: int, pos: dict[int, int]) -> Iterator[Record]:
        end = self.bounds[p][1]
        while offset < end:
            recs = [r for r in self._read(p, offset, CHUNK) if r.offset < end]
            if not recs:
                pos[p] = end
                return
            self._count(recs)
            yield from recs
            offset = recs[-1].offset + 1

    def _backward_iter(self, p: int, upper: int, pos: dict[int, int]) -> Iterator[Record]:
        start = self.bounds[p][0]
        while upper > start:
            lo = max(start, upper - CHUNK)
            recs = self._read_range(p, lo, upper)
            self._count(recs)
            yield from reversed(recs)
            upper = lo
        pos[p] = start

    def forward(self, positions: dict[int, int]):
        return self._merge(positions, self._forward_iter, forward=True)

    def backward(self, positions: dict[int, int]):
        return self._merge(positions, self._backward_iter, forward=False)

    def _merge(self, positions, make_iter, forward: bool):
        """k-way merge by timestamp (then partition, offset); positions advance past every
        record examined, so the next page continues exactly where this one stopped."""
        pos = dict(positions)
        iters = {p: make_iter(p, o, pos) for p, o in positions.items()}
        heap = []
        sign = 1 if forward else -1
        for p, it in iters.items():
            r = next(it, None)
            if r is not None:
                heap.append((sign * r.timestamp_ms, sign * p, sign * r.offset, p, r))
        heapq.heapify(heap)
        out: list[tuple[int, Record]] = []
        filters = self.req.filters
        expression = self.req.expression
        examined = 0
        while heap:
            if len(out) >= self.req.page_size:
                return out, "page full", pos
            stop = self._budget_left() if examined else None  # always make some progress
            if stop:
                return out, stop, pos
            examined += 1
            self.examined = examined
            *_, p, r = heapq.heappop(heap)
            pos[p] = r.offset + 1 if forward else r.offset
            if all(f.matches(r) for f in filters) and (
                expression is None or expression.matches(r, p)
            ):
                out.append((p, r))
            nxt = next(iters[p], None)
            if nxt is not None:
                heapq.heappush(heap, (sign * nxt.timestamp_ms, sign * p, sign * nxt.offset, p, nxt))
        return out, "end of data", pos
