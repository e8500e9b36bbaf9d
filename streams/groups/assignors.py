"""Partition assignors, computed by the group leader as in Kafka's client-side protocol.

Each takes ``{member_id: Subscription}`` and ``{topic: partition count}`` and returns
``{member_id: {topic: [partitions]}}``. Members are taken in member-id order, so every leader
computes the same answer.

- ``range`` (Kafka's RangeAssignor): per topic, contiguous ranges; the first
  ``partitions % members`` members get one extra.
- ``roundrobin`` (RoundRobinAssignor): all subscribed partitions, sorted, dealt in turn to the
  members subscribed to each topic.
- ``sticky`` (StickyAssignor, eager): a balanced assignment that keeps each member's previously
  owned partitions (from the subscription's ownedPartitions) where balance allows.
"""

from __future__ import annotations

from collections.abc import Callable

from streams.groups.schemas import Subscription, TopicPartitions

Assignor = Callable[[dict[str, Subscription], dict[str, int]], dict[str, TopicPartitions]]


def _empty(members) -> dict[str, TopicPartitions]:
    return {m: {} for m in members}


def range_assign(
    subs: dict[str, Subscription], counts: dict[str, int]
) -> dict[str, TopicPartitions]:
    out = _empty(subs)
    topics = sorted({t for s in subs.values() for t in s.topics if t in counts})
    for topic in topics:
        members = sorted(m for m, s in subs.items() if topic in s.topics)
        n, k = counts[topic], len(members)
        per, extra = divmod(n, k)
        start = 0
        for i, m in enumerate(members):
            size = per + (1 if i < extra else 0)
            if size:
                out[m][topic] = list(range(start, start + size))
            start += size
    return out


def roundrobin_assign(
    subs: dict[str, Subscription], counts: dict[str, int]
) -> dict[str, TopicPartitions]:
    out = _empty(subs)
    members = sorted(subs)
    tps = sorted(
        (t, p)
        for t in {t for s in subs.values() for t in s.topics if t in counts}
        for p in range(counts[t])
    )
    i = 0
    for topic, p in tps:
        for _ in range(len(members)):  # next member (cyclically) subscribed to this topic
            m = members[i % len(members)]
            i += 1
            if topic in subs[m].topics:
                out[m].setdefault(topic, []).append(p)
                break
    return out


def sticky_assign(
    subs: dict[str, Subscription], counts: dict[str, int]
) -> dict[str, TopicPartitions]:
    """Balanced (member loads differ by at most one among members subscribed alike) while
    keeping owned partitions; new partitions go to the least-loaded eligible member."""
    members = sorted(subs)
    all_tps = sorted(
        (t, p)
        for t in {t for s in subs.values() for t in s.topics if t in counts}
        for p in range(counts[t])
    )
    eligible = {tp: [m for m in members if tp[0] in subs[m].topics] for tp in all_tps}
    quota = -(-len(all_tps) // max(len(members), 1))  # ceil: nobody keeps more than this
    owned: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    taken: set[tuple[str, int]] = set()
    for m in members:
        for topic, parts in sorted(subs[m].owned.items()):
            for p in sorted(parts):
                tp = (topic, p)
                if (
                    tp in eligible
                    and m in eligible[tp]
                    and tp not in taken
                    and len(owned[m]) < quota
                ):
                    owned[m].append(tp)
                    taken.add(tp)
    for tp in all_tps:
        if tp in taken or not eligible[tp]:
            continue
        m = min(eligible[tp], key=lambda x: (len(owned[x]), x))
        owned[m].append(tp)
    # rebalance: move from the most to the least loaded while they differ by more than one
    while True:
        loads = sorted(members, key=lambda x: (len(owned[x]), x))
        lo, hi = loads[0], loads[-1]
        movable = [tp for tp in owned[hi] if lo in eligible[tp]]
        if len(owned[hi]) - len(owned[lo]) <= 1 or not movable:
            break
        tp = movable[-1]
        owned[hi].remove(tp)
        owned[lo].append(tp)
    out = _empty(subs)
    for m, tps in owned.items():
        for topic, p in sorted(tps):
            out[m].setdefault(topic, []).append(p)
    return out


ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "sticky": sticky_assign,
}
