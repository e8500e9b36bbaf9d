"""Read-side helpers for the topic pages: in-rates, config rows, sorting.

The in-rate needs no sampler or history: it is the number of records whose timestamp falls in the
last minute (end offset − the first offset at or after now − 60 s, found through the time index),
so it is right on the first page load. Partitions with no write in that minute cost nothing.
"""

from __future__ import annotations

import dataclasses
import time

from streams.log.config import LONG_MAX, SCHEMA

RATE_WINDOW_MS = 60_000


def now_ms() -> int:
    return int(time.time() * 1000)


def snapshot_as_of(topics) -> int | None:
    """When the oldest figures of `topics` were taken, if they come from a snapshot (a large
    external cluster's list: ``TopicSummary.as_of_ms``); None: they are from now."""
    return min((t.as_of_ms for t in topics if t.as_of_ms is not None), default=None)


def partition_window_counts(cluster, description, now: int | None = None) -> dict[int, int]:
    """{partition: records stamped in the last RATE_WINDOW_MS} for one topic."""
    now = now_ms() if now is None else now
    since = now - RATE_WINDOW_MS
    out = {}
    for p in description.partitions:
        out[p.partition] = 0
        idle = p.last_append_ms is None or p.last_append_ms < since
        if idle or p.end_offset <= p.log_start_offset:
            continue
        first = cluster.offset_for_timestamp(
            topic=description.name, partition=p.partition, timestamp_ms=since
        )
        if first is not None:
            out[p.partition] = max(p.end_offset - first, 0)
    return out


def topic_rate(cluster, summary, now: int | None = None) -> float:
    """Records per second over the last minute for a TopicSummary (0 when idle)."""
    now = now_ms() if now is None else now
    if summary.last_append_ms is None or summary.last_append_ms < now - RATE_WINDOW_MS:
        return 0.0
    d = cluster.describe_topic(summary.name)
    return sum(partition_window_counts(cluster, d, now).values()) / (RATE_WINDOW_MS / 1000)


def rate_text(per_second: float | None) -> str:
    """0.05, 4.2, 123, 1.2 k, 3.4 M (records per second)."""
    if per_second is None:
        return "–"
    r = float(per_second)
    if r == 0:
        return "0"
    if r < 1:
        return f"{r:.2f}"
    if r < 10:
        return f"{r:.1f}"
    if r < 1000:
        return f"{r:.0f}"
    if r < 1_000_000:
        return f"{r / 1000:.1f} k"
    return f"{r / 1_000_000:.1f} M"


@dataclasses.dataclass(frozen=True)
class TopicRow:
    """A TopicSummary with its in-rate, for the list and the overview."""

    topic: object
    rate: float

    @property
    def rate_text(self) -> str:
        return rate_text(self.rate)


SORTS = {
    "name": (lambda t: t.name, False),
    "partitions": (lambda t: (t.partitions, t.name), True),
    "records": (lambda t: (t.record_count, t.name), True),
    "size": (lambda t: (t.size_bytes, t.name), True),
    "last_write": (lambda t: (t.last_append_ms or -1, t.name), True),
}


def sort_topics(topics: list, sort: str) -> tuple[list, str]:
    """Sort TopicSummaries by a known column (biggest first for numbers); unknown: by name."""
    if sort not in SORTS:
        sort = "name"
    key, reverse = SORTS[sort]
    return sorted(topics, key=key, reverse=reverse), sort


@dataclasses.dataclass(frozen=True)
class ConfigRow:
    key: str
    value: str
    default: str
    overridden: bool
    doc: str

    @property
    def human(self) -> str:
        """The value for people, when it is a duration or a size ('' when the raw value says it
        all)."""
        return human_config_value(self.key, self.value)

    @property
    def default_human(self) -> str:
        return human_config_value(self.key, self.default) or self.default


def human_config_value(key: str, value: str) -> str:
    from brokerui.console.templatetags.tidelog_format import duration_ms, size

    try:
        n = int(value)
    except (TypeError, ValueError):
        return ""
    if n == LONG_MAX:
        return "no limit"
    if key.endswith(".ms"):
        return duration_ms(n)
    if key.endswith(".bytes"):
        return "unlimited" if n < 0 else size(n)
    return ""


def config_rows(description) -> list[ConfigRow]:
    """Every config key: effective value, default, whether it is overridden, what it means."""
    rows = []
    for key, value in description.config.items():
        default, _, doc = SCHEMA.get(key, ("", None, ""))
        rows.append(ConfigRow(key, value, default, key in description.overrides, doc))
    return rows
