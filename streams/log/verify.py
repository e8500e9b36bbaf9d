"""Deep verification and repair of a store's logs: Kafka's ``kafka-dump-log --deep-iteration``
idea, over every segment of every partition (``manage.py verify_log`` is its command line).

`verify_store` reads every batch of every segment — framing, magic, CRC-32C and offsets that
follow on, across segments too — and reports every damaged range (see ``damage``) with what a
repair would cut: the damaged bytes, and the offsets they held, which are lost. Ranges it finds
are recorded in the partition, as a read meeting them would, so reads refuse them from then on.

With `repair`, each damaged segment is rewritten without its damaged bytes (the batches before
and after keep their offsets; the lost offsets become a recorded, repaired gap that consumers
step over), by the compaction cleaner's crash-safe swap. Nothing after the damage is lost.
Repair is for an operator with the broker stopped (the command opens the data directory, which
has one owner at a time) and is audited by the caller.

Thread-safety: as the partitions' own methods; meant for a store no broker is serving.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

from streams.log import damage
from streams.log.cleaner import swap_segment
from streams.log.partition import PartitionLog, collect_damage
from streams.log.segment import LogSegment, Rebuilt, SegmentGap
from streams.log.store import LogStore


@dataclasses.dataclass(frozen=True)
class PartitionReport:
    topic: str
    partition: int
    segments: int
    batches: int
    size_bytes: int
    damaged: tuple[damage.DamagedRange, ...]  # left after this run
    repaired: tuple[damage.DamagedRange, ...] = ()  # cut out by this run

    @property
    def ok(self) -> bool:
        return not self.damaged


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    partitions: tuple[PartitionReport, ...]

    @property
    def damaged(self) -> list[tuple[PartitionReport, damage.DamagedRange]]:
        return [(p, d) for p in self.partitions for d in p.damaged]

    @property
    def repaired(self) -> list[tuple[PartitionReport, damage.DamagedRange]]:
        return [(p, d) for p in self.partitions for d in p.repaired]


def verify_store(
    store: LogStore, *, topic: str | None = None, repair: bool = False
) -> VerifyReport:
    """Verify every partition (of `topic` only, when given); with `repair`, cut the damage out."""
    names = [topic] if topic is not None else store.list_topics()
    reports = []
    for name in names:
        for p in range(store.partition_count(name)):
            plog = store.partition_log(name, p)
            report = verify_partition(plog)
            if repair and report.damaged:
                report = dataclasses.replace(
                    report, damaged=(), repaired=tuple(repair_partition(plog))
                )
            reports.append(report)
    return VerifyReport(tuple(reports))


def verify_partition(plog: PartitionLog) -> PartitionReport:
    """Read every batch of every segment; record and return the damaged ranges."""
    segments = plog.segments
    found: dict[LogSegment, Rebuilt] = {}
    batches = 0
    for seg in segments:
        count, gaps = _scan(seg)
        batches += count
        found[seg] = Rebuilt(0, gaps)
    ranges = collect_damage(
        segments, list(plog.damage_ranges), found, plog.log_end_offset, plog.clock()
    )
    plog.record_damage(ranges)
    return PartitionReport(
        plog.topic,
        plog.partition,
        len(segments),
        batches,
        plog.size_bytes,
        plog.damaged,
    )


def _scan(seg: LogSegment) -> tuple[int, list[SegmentGap]]:
    count, gaps, expected = 0, [], seg.base_offset
    for item in damage.walk(seg.fd, 0, seg.size, seg.base_offset, seg.contiguous, seg.jumps):
        if isinstance(item, damage.Gap):
            gaps.append(SegmentGap(item.start, item.end, expected, item.next_base, item.reason))
        else:
            count += 1
            expected = item.next_offset
    return count, gaps


def repair_partition(plog: PartitionLog) -> list[damage.DamagedRange]:
    """Cut every damaged range out of its segment; returns them, marked repaired."""
    now = plog.clock()
    repaired = []
    for seg in list(plog.segments):
        ranges = [  # every unrepaired one in the segment: the rewrite drops all of them
            d for d in plog.damage_ranges if d.segment == seg.base_offset and d.repaired_ms is None
        ]
        if not ranges:
            continue
        done = [dataclasses.replace(d, repaired_ms=now) for d in ranges]

        def record(done=done, ranges=ranges) -> None:
            # before the swap's commit point: a crash between the two leaves the damaged bytes
            # in place, found again (and so unrepaired) by the next open
            kept = [r for r in plog.damage_ranges if r not in ranges]
            damage.save(plog.directory, kept + done)

        if any(d.byte_count for d in ranges):
            swap_segment(plog, seg, _valid_batches(seg), now, before_commit=record)
        else:  # only missing offsets: nothing to cut, the loss is accepted
            record()
        plog.mark_repaired(ranges, done)
        repaired += done
    return repaired


def _valid_batches(seg: LogSegment) -> Iterator[tuple[bytes, int, int, int]]:
    for item in damage.walk(seg.fd, 0, seg.size, seg.base_offset, seg.contiguous, seg.jumps):
        if isinstance(item, damage.Batch):
            data = os.pread(seg.fd, item.size, item.position)
            yield data, item.base_offset, item.next_offset, item.max_timestamp
