"""`CounterSampler`: what changed in the store and the group coordinator since the last look.

Each `sample()` reads, without locking anything for long, the end offset and appended-byte count
of every partition and the committed offsets of every group, and returns the differences since
the previous call (rates), the current values (gauges), and the timestamps of the records that
groups committed past since then (for event-time consume rates).

Internal topics (``__*``, ``_schemas``) are not measured: they are the broker's own traffic.

Bytes read by a group are an estimate: records committed × the partition's average record size
on disk (its bytes over its records), since a commit names offsets, not bytes.

Event times come from record batch *headers* (first and max timestamp, offset range), read
alone (``LogStore.batch_headers``: a pread of each header, no batch body), never from decoding
records: the sampler shares the process with the Kafka listener, and decoding a
catching-up group's backlog record by record took a fifth of its CPU. A batch's records are
spread evenly over [first timestamp, max timestamp] — exact for one-record batches and for a
batch within one window, and a batch spans one producer linger (milliseconds) otherwise — and
counted per 1-second window, so the window operator sees one event per batch and window.

Not thread-safe: one sampler thread calls `sample()`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from streams.broker.metrics.series import SECOND_MS, series
from streams.errors import OffsetOutOfRange, UnknownTopic
from streams.log import records as rb
from streams.log.store import is_internal

Key = tuple[str, int]  # (topic, partition)
TOTAL_NAMES = (series("records_in"), series("bytes_in"))


class Consumed(NamedTuple):
    """Records a group committed past since the last sample, counted by event time."""

    group: str
    topic: str
    partition: int
    counts: list[tuple[int, int]]  # (an event time, records at it), in offset order


class Sample(NamedTuple):
    rates: dict[str, float]  # series -> amount since the previous sample
    gauges: dict[str, float]  # series -> current value
    consumed: list[Consumed]


class CounterSampler:
    def __init__(self, store, coordinator, *, event_time_batches: int = 100_000):
        self._store = store
        self._coordinator = coordinator
        self._budget = event_time_batches  # batch headers read per partition per sample
        self._partitions: dict[Key, tuple[int, int, int]] = {}  # key -> (id(log), end, bytes)
        self._commits: dict[tuple[str, str, int], int] = {}
        self._et_cursor: dict[tuple[str, str, int], int] = {}
        self._started = False
        # series names by what they name: quoting them anew each second was most of a sample
        # of 5,000 partitions (0.6 s of 0.8 s); kept while what they name exists
        self._partition_names: dict[Key, tuple[str, str, str]] = {}
        self._topic_names: dict[str, tuple[str, str]] = {}
        self._names: dict[tuple, str] = {}
        self._names_used: dict[tuple, str] = {}
        self._gauges: dict[str, float] = {}  # the last sample's
        self._reset_peeks()

    def _reset_peeks(self) -> None:
        self._peeked: dict[Key, tuple[int, int]] = {}  # partition -> (end, bytes) at last peek
        self._peek_sums: dict[str, list[float]] = {}  # topic ("" for all) -> [records, bytes]
        self._peek_values: dict[str, float] = {}  # series -> the value the last peek reported

    def sample(self) -> Sample:
        rates: dict[str, float] = defaultdict(float)
        gauges: dict[str, float] = {}
        logs = self._sample_partitions(rates, gauges)
        consumed = self._sample_groups(logs, rates, gauges)
        self._started = True
        self._gauges = gauges
        self._reset_peeks()
        return Sample(dict(rates), gauges, consumed)

    def peek(self) -> Sample:
        """The open second so far: what changed since the last `sample()` — the amounts of
        the rates, the values of the gauges — reporting only the series whose value moved
        since the previous peek (or the sample), so an idle broker's peek is one loop over its
        partitions and reports nothing. Changes no state `sample()` reads: the next sample
        still counts the whole second. Event times are not peeked (an event-time window
        closes by watermark, not by the clock), nor partitions made since the sample."""
        rates: dict[str, float] = defaultdict(float)
        gauges: dict[str, float] = {}
        if not self._started:
            return Sample({}, {}, [])
        logs: dict[Key, object] = {}
        sums = self._peek_sums
        for log in self._store.all_partitions():
            key = (log.topic, log.partition)
            prev = self._partitions.get(key)
            if prev is None or prev[0] != id(log):
                continue  # internal, or made since the sample: the next sample counts it
            logs[key] = log
            now = (log.high_watermark, log.bytes_appended)
            before = self._peeked.get(key, (prev[1], prev[2]))
            if now == before:
                continue
            self._peeked[key] = now
            d_records, d_bytes = now[0] - before[0], now[1] - before[1]
            names = self._partition_names[key]
            rates[names[0]] = max(0, now[0] - prev[1])
            rates[names[1]] = max(0, now[1] - prev[2])
            gauges[names[2]] = now[0]
            for topic in (key[0], ""):
                total = sums.get(topic)
                if total is None:
                    total = sums[topic] = [0.0, 0.0]
                total[0] += d_records
                total[1] += d_bytes
        for topic, (n, nbytes) in sums.items():
            names = self._topic_names.get(topic) if topic else TOTAL_NAMES
            if names is not None:
                rates[names[0]], rates[names[1]] = n, nbytes
        self._peek_groups(logs, rates, gauges)
        return Sample(self._moved(rates, 0.0), self._moved(gauges, None), [])

    def _moved(self, values: dict[str, float], base: float | None) -> dict[str, float]:
        """The `values` that differ from what the last peek reported (before any: `base`, or
        for gauges the last sample's value); remembered as reported."""
        reported = self._peek_values
        gauges = self._gauges
        out = {}
        for name, value in values.items():
            last = reported.get(name, base if base is not None else gauges.get(name))
            if value != last:
                out[name] = reported[name] = value
        return out

    def _peek_groups(self, logs, rates, gauges) -> None:
        name = self._known_name
        for group, _state in self._coordinator.list_groups():
            total_lag = 0
            for (topic, p), c in self._coordinator.committed(group).items():
                log = logs.get((topic, p))
                gkey = (group, topic, p)
                if log is not None and gkey in self._commits:  # else: new since the sample
                    total_lag += self._group_partition(gkey, log, c.offset, rates, gauges, name)
            gauges[name("group_lag", group)] = total_lag

    # ------------------------------------------------------------------ partitions

    def _sample_partitions(self, rates, gauges) -> dict[Key, object]:
        logs: dict[Key, object] = {}
        seen: dict[Key, tuple[int, int, int]] = {}
        total_records, total_bytes = TOTAL_NAMES
        rates[total_records] += 0
        rates[total_bytes] += 0
        names, topic_names = self._partition_names, self._topic_names
        kept_names: dict[Key, tuple[str, str, str]] = {}
        for log in self._store.all_partitions():
            topic, p = log.topic, log.partition
            if is_internal(topic):
                continue
            key = (topic, p)
            logs[key] = log
            end, nbytes = log.high_watermark, log.bytes_appended
            seen[key] = (id(log), end, nbytes)
            prev = self._partitions.get(key)
            if prev is not None and prev[0] == id(log):
                d_records, d_bytes = max(0, end - prev[1]), max(0, nbytes - prev[2])
            elif self._started:  # created (or recreated) since the last sample
                d_records, d_bytes = end - log.log_start_offset, nbytes
            else:
                d_records = d_bytes = 0
            by_topic = topic_names.get(topic)
            if by_topic is None:
                by_topic = topic_names[topic] = (
                    series("records_in", topic),
                    series("bytes_in", topic),
                )
            mine = names.get(key)
            if mine is None:
                mine = (
                    series("records_in", topic, p),
                    series("bytes_in", topic, p),
                    series("end_offset", topic, p),
                )
            kept_names[key] = mine
            rates[total_records] += d_records
            rates[total_bytes] += d_bytes
            rates[by_topic[0]] += d_records
            rates[by_topic[1]] += d_bytes
            rates[mine[0]] += d_records
            rates[mine[1]] += d_bytes
            gauges[mine[2]] = end
        self._partitions = seen
        self._partition_names = kept_names
        self._topic_names = {t: n for t, n in topic_names.items() if (t, 0) in kept_names}
        return logs

    def _known_name(self, kind: str, *parts) -> str:
        """`series(kind, *parts)`, remembered from the last sample if it named it (a peek
        changes nothing the sample forgets by)."""
        name = self._names.get((kind, *parts))
        return name if name is not None else series(kind, *parts)

    def _name(self, kind: str, *parts) -> str:
        """`series(kind, *parts)`, remembered from the previous sample (the groups' series:
        names of groups and partitions gone are forgotten)."""
        key = (kind, *parts)
        name = self._names.get(key)
        if name is None:
            name = series(kind, *parts)
        self._names_used[key] = name
        return name

    # ------------------------------------------------------------------ groups

    def _sample_groups(self, logs, rates, gauges) -> list[Consumed]:
        consumed: list[Consumed] = []
        commits: dict[tuple[str, str, int], int] = {}
        self._names_used = {}
        for group, _state in self._coordinator.list_groups():
            committed = self._coordinator.committed(group)
            rates[self._name("group_records", group)] += 0
            rates[self._name("group_bytes", group)] += 0
            total_lag = 0
            for (topic, p), c in committed.items():
                log = logs.get((topic, p))
                if log is None:
                    continue
                gkey = (group, topic, p)
                commits[gkey] = c.offset
                total_lag += self._group_partition(gkey, log, c.offset, rates, gauges, self._name)
                got = self._event_times(gkey, c.offset)
                if got:
                    consumed.append(Consumed(group, topic, p, got))
            gauges[self._name("group_lag", group)] = total_lag
        self._commits = commits
        self._names = self._names_used
        return consumed

    def _group_partition(self, gkey, log, offset: int, rates, gauges, name) -> int:
        """Add one group partition's rates (commits since the last sample) and gauges; its
        lag. `name` makes series names."""
        group, topic, p = gkey
        prev = self._commits.get(gkey)
        delta = max(0, offset - prev) if prev is not None else 0
        rates[name("records_out", topic)] += delta
        rates[name("records_out", topic, p)] += delta
        rates[name("group_records", group)] += delta
        nbytes = delta * _average_record_bytes(log)
        rates[name("bytes_out", topic)] += nbytes
        rates[name("bytes_out", topic, p)] += nbytes
        rates[name("group_bytes", group)] += nbytes
        lag = max(0, log.high_watermark - max(offset, log.log_start_offset))
        gauges[name("group_committed", group, topic, p)] = offset
        gauges[name("group_lag", group, topic, p)] = lag
        return lag

    def _event_times(self, gkey, committed: int) -> list[tuple[int, int]]:
        """(event time, count) of the records in [cursor, committed), from batch headers
        read alone (no record, no batch body); at most `event_time_batches` of them per
        sample, the rest next time."""
        cursor = self._et_cursor.get(gkey)
        if cursor is None or committed < cursor:  # first sight, or offsets reset backwards
            self._et_cursor[gkey] = committed
            return []
        if committed == cursor:
            return []
        _group, topic, p = gkey
        try:
            headers = self._store.batch_headers(topic, p, cursor, committed, self._budget)
        except OffsetOutOfRange:  # retention deleted what the group skipped over
            self._et_cursor[gkey] = committed
            return []
        except UnknownTopic:
            return []
        counts, reached = header_event_times(headers, cursor, committed)
        self._et_cursor[gkey] = reached if counts else committed
        return counts


def batch_event_times(raw: bytes, start: int, end: int) -> tuple[list[tuple[int, int]], int]:
    """(event time, count) pairs for the offsets in [start, end) of the whole batches in `raw`,
    one pair per batch and 1-second window, and the offset reached."""
    headers = []
    pos = 0
    while pos + rb.HEADER_SIZE <= len(raw):
        h = rb.parse_header(raw, pos)
        pos += h.size
        headers.append(h)
    return header_event_times(headers, start, end)


def header_event_times(
    headers: list[rb.BatchHeader], start: int, end: int
) -> tuple[list[tuple[int, int]], int]:
    """``batch_event_times`` of the batches whose headers are `headers`, in offset order."""
    counts: list[tuple[int, int]] = []
    reached = start
    for h in headers:
        if h.base_offset >= end:
            break
        reached = min(h.next_offset, end)
        lo = max(start, h.base_offset)
        if reached <= lo or h.is_control:
            continue
        counts.extend(_spread(h, lo, reached))
    return counts, reached


def _spread(h: rb.BatchHeader, lo: int, hi: int) -> list[tuple[int, int]]:
    """Offsets [lo, hi) of batch `h` by 1-second window of their (interpolated) timestamps."""
    first, last = h.base_timestamp, h.max_timestamp
    if h.attributes & rb.ATTR_LOG_APPEND_TIME or first >= last:
        return [(last, hi - lo)]
    span, steps = last - first, max(1, h.last_offset_delta)

    def stamp(offset: int) -> int:
        return first + span * (offset - h.base_offset) // steps

    out = []
    while lo < hi:
        window_end = stamp(lo) - stamp(lo) % SECOND_MS + SECOND_MS
        # the first offset whose stamp reaches the next window (stamps grow with offsets)
        nxt = h.base_offset + -(-(window_end - first) * steps // span)
        nxt = min(hi, max(nxt, lo + 1))
        out.append((stamp(lo), nxt - lo))
        lo = nxt
    return out


def _average_record_bytes(log) -> float:
    records = log.high_watermark - log.log_start_offset
    return log.size_bytes / records if records > 0 else 0.0
