"""`CounterSampler`: what changed in the store and the group coordinator since the last look.

Each `sample()` reads, without locking anything for long, the end offset and appended-byte count
of every partition and the committed offsets of every group, and returns the differences since
the previous call (rates), the current values (gauges), and the timestamps of the records that
groups committed past since then (for event-time consume rates).

Internal topics (``__*``) are not measured: they are the broker's own traffic.

Bytes read by a group are an estimate: records committed × the partition's average record size
on disk (its bytes over its records), since a commit names offsets, not bytes.

Not thread-safe: one sampler thread calls `sample()`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from streams.broker.metrics.series import series
from streams.errors import OffsetOutOfRange, UnknownTopic

Key = tuple[str, int]  # (topic, partition)


class Consumed(NamedTuple):
    """Records a group committed past since the last sample, by their own timestamps."""

    group: str
    topic: str
    partition: int
    timestamps: list[int]


class Sample(NamedTuple):
    rates: dict[str, float]  # series -> amount since the previous sample
    gauges: dict[str, float]  # series -> current value
    consumed: list[Consumed]


class CounterSampler:
    def __init__(self, store, coordinator, *, event_time_cap: int = 20_000):
        self._store = store
        self._coordinator = coordinator
        self._cap = event_time_cap  # records read per partition per sample for event time
        self._partitions: dict[Key, tuple[int, int, int]] = {}  # key -> (id(log), end, bytes)
        self._commits: dict[tuple[str, str, int], int] = {}
        self._et_cursor: dict[tuple[str, str, int], int] = {}
        self._started = False

    def sample(self) -> Sample:
        rates: dict[str, float] = defaultdict(float)
        gauges: dict[str, float] = {}
        logs = self._sample_partitions(rates, gauges)
        consumed = self._sample_groups(logs, rates, gauges)
        self._started = True
        return Sample(dict(rates), gauges, consumed)

    # ------------------------------------------------------------------ partitions

    def _sample_partitions(self, rates, gauges) -> dict[Key, object]:
        logs: dict[Key, object] = {}
        seen: dict[Key, tuple[int, int, int]] = {}
        rates[series("records_in")] += 0
        rates[series("bytes_in")] += 0
        for log in self._store.all_partitions():
            topic, p = log.topic, log.partition
            if topic.startswith("__"):
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
            for parts in ((), (topic,), (topic, p)):
                rates[series("records_in", *parts)] += d_records
                rates[series("bytes_in", *parts)] += d_bytes
            gauges[series("end_offset", topic, p)] = end
        self._partitions = seen
        return logs

    # ------------------------------------------------------------------ groups

    def _sample_groups(self, logs, rates, gauges) -> list[Consumed]:
        consumed: list[Consumed] = []
        commits: dict[tuple[str, str, int], int] = {}
        for group, _state in self._coordinator.list_groups():
            committed = self._coordinator.committed(group)
            rates[series("group_records", group)] += 0
            rates[series("group_bytes", group)] += 0
            total_lag = 0
            for (topic, p), c in committed.items():
                log = logs.get((topic, p))
                if log is None:
                    continue
                gkey = (group, topic, p)
                commits[gkey] = c.offset
                total_lag += self._group_partition(gkey, log, c.offset, rates, gauges)
                got = self._event_times(gkey, c.offset)
                if got:
                    consumed.append(Consumed(group, topic, p, got))
            gauges[series("group_lag", group)] = total_lag
        self._commits = commits
        return consumed

    def _group_partition(self, gkey, log, offset: int, rates, gauges) -> int:
        group, topic, p = gkey
        prev = self._commits.get(gkey)
        delta = max(0, offset - prev) if prev is not None else 0
        rates[series("records_out", topic)] += delta
        rates[series("records_out", topic, p)] += delta
        rates[series("group_records", group)] += delta
        nbytes = delta * _average_record_bytes(log)
        rates[series("bytes_out", topic)] += nbytes
        rates[series("bytes_out", topic, p)] += nbytes
        rates[series("group_bytes", group)] += nbytes
        lag = max(0, log.high_watermark - max(offset, log.log_start_offset))
        gauges[series("group_committed", group, topic, p)] = offset
        gauges[series("group_lag", group, topic, p)] = lag
        return lag

    def _event_times(self, gkey, committed: int) -> list[int]:
        """Timestamps of records in [cursor, committed), at most `cap` of them per sample."""
        cursor = self._et_cursor.get(gkey)
        if cursor is None or committed < cursor:  # first sight, or offsets reset backwards
            self._et_cursor[gkey] = committed
            return []
        if committed == cursor:
            return []
        _group, topic, p = gkey
        want = min(committed - cursor, self._cap)
        try:
            records = self._store.read(topic, p, cursor, max_records=want, max_bytes=64 << 20)
        except OffsetOutOfRange:  # retention deleted what the group skipped over
            self._et_cursor[gkey] = committed
            return []
        except UnknownTopic:
            return []
        stamps = [r.timestamp_ms for r in records if r.offset < committed]
        self._et_cursor[gkey] = records[-1].offset + 1 if stamps else committed
        return stamps


def _average_record_bytes(log) -> float:
    records = log.high_watermark - log.log_start_offset
    return log.size_bytes / records if records > 0 else 0.0
