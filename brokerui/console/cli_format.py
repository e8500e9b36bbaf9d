"""Text output of ``manage.py consumer_groups``, in the columns of ``kafka-consumer-groups.sh``.

Pure functions from engine values (``GroupDescription``, ``GroupLag``, ``ResetPlan``) to text, so
the command stays a thin parser and these can be tested on their own. Missing values print as
``-``, as Kafka's tool does; columns Tidelog adds beyond Kafka's always come after Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

MISSING = "-"


def cell(value: object) -> str:
    return MISSING if value is None or value == "" else str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, wide enough for header and values."""
    body = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))
    lines = [headers, *body]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


# ------------------------------------------------------------------------------ --list


def group_list(groups: Sequence[tuple[str, str]], with_state: bool) -> str:
    """Kafka's ``--list`` (one group id a line) or ``--list --state`` (GROUP STATE)."""
    if not with_state:
        return "\n".join(group for group, _ in groups)
    return table(("GROUP", "STATE"), groups)


# ------------------------------------------------------------------------------ --describe

OFFSET_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
MEMBER_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_COLUMNS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")


def state_banner(description) -> str | None:
    """The line Kafka prints above a description when the group is not Stable."""
    if not description.members:
        return f"Consumer group '{description.group_id}' has no active members."
    if description.state in ("PreparingRebalance", "CompletingRebalance"):
        return f"Warning: Consumer group '{description.group_id}' is rebalancing."
    return None


def describe_offsets(description, lag) -> str:
    """Kafka's default ``--describe``: one row per partition the group has committed offsets
    for or is assigned, then one row per member that owns no partition (idle members)."""
    group = description.group_id
    rows = [
        (
            group,
            p.topic,
            p.partition,
            p.committed,
            p.end_offset,
            p.lag,
            p.member_id,
            p.host,
            p.client_id,
        )
        for p in lag.partitions
    ]
    owning = {p.member_id for p in lag.partitions if p.member_id}
    rows += [
        (group, None, None, None, None, None, m.member_id, m.host, m.client_id)
        for m in description.members
        if m.member_id not in owning
    ]
    return table(OFFSET_COLUMNS, rows)


def retention_warnings(lag) -> list[str]:
    """One line per partition whose committed offset was deleted by retention."""
    return [
        f"Warning: {p.topic}-{p.partition}: committed offset {p.committed} is below the log start "
        f"offset {p.log_start_offset} (fallen behind retention): records {p.committed}.."
        f"{p.log_start_offset - 1} are gone, and the group's next read restarts where its "
        "auto.offset.reset says"
        for p in lag.partitions
        if p.fallen_behind_retention
    ]


def deleted_topic_warnings(group: str, deleted_topics: Iterable[str]) -> list[str]:
    """One line per topic the group has offsets for but that no longer exists (describe skips
    those partitions, as they have no log end offset)."""
    return [
        f"Warning: the group has committed offsets for topic '{t}', which no longer exists; "
        f"remove them with --delete-offsets --group {group} --topic {t}"
        for t in sorted(deleted_topics)
    ]


def describe_members(description, verbose: bool = False) -> str:
    """Kafka's ``--describe --members`` (``--verbose`` adds the ASSIGNMENT column)."""
    headers = MEMBER_COLUMNS + (("ASSIGNMENT",) if verbose else ())
    rows = []
    for m in description.members:
        count = sum(len(parts) for parts in m.assignment.values())
        row = [description.group_id, m.member_id, m.host, m.client_id, count]
        if verbose:
            row.append(assignment_text(m.assignment))
        rows.append(row)
    return table(headers, rows)


def assignment_text(assignment: dict[str, list[int]]) -> str:
    """Kafka's ``topic(0,1,2),other(0)``."""
    return ",".join(
        f"{topic}({','.join(str(p) for p in sorted(parts))})"
        for topic, parts in sorted(assignment.items())
    )


def describe_state(description) -> str:
    """Kafka's ``--describe --state``. The coordinator is this process's embedded one, so it
    has no broker address to show."""
    return table(
        STATE_COLUMNS,
        [
            (
                description.group_id,
                None,
                description.protocol,
                description.state,
                len(description.members),
            )
        ],
    )


# ------------------------------------------------------------------------------ --reset-offsets

RESET_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "NEW-OFFSET",  # Kafka's four columns, then Tidelog's
    "CURRENT-OFFSET",
    "REPLAY",
    "SKIP",
    "NOTE",
)


def reset_plan(plan) -> str:
    rows = [
        (
            plan.group_id,
            r.topic,
            r.partition,
            r.target,
            r.current,
            None if r.current is None else r.to_replay,
            None if r.current is None else r.to_skip,
            f"clamped: {r.clamp}" if r.clamp else None,
        )
        for r in plan.rows
    ]
    return table(RESET_COLUMNS, rows)


def reset_summary(plan, executed: bool) -> str:
    n = len(plan.rows)
    partitions = f"{n} partition{'s' if n != 1 else ''}"
    counts = f"{plan.total_replay} records to replay, {plan.total_skip} to skip"
    if executed:
        return f"Reset the offsets of group '{plan.group_id}' on {partitions} ({counts})."
    return (
        f"Dry run: nothing was changed. Executing this plan would move {partitions} "
        f"({counts}); add --execute to apply it."
    )


def export_csv(plan) -> str:
    """Kafka's ``--export``: ``topic,partition,offset`` lines, readable by ``--from-file``."""
    return "\n".join(f"{r.topic},{r.partition},{r.target}" for r in plan.rows)


# ------------------------------------------------------------------------------ deletes


def deleted_groups(groups: Sequence[str]) -> str:
    names = ", ".join(f"'{g}'" for g in groups)
    return f"Deletion of requested consumer groups ({names}) was successful."


def deleted_offsets(group: str, topic: str, partitions: Sequence[tuple[str, int]]) -> str:
    head = f"Request succeed for deleting offsets with topic {topic} group {group}"
    rows = [(t, p, "Successful") for t, p in sorted(partitions)]
    return head + "\n\n" + table(("TOPIC", "PARTITION", "STATUS"), rows)


# ------------------------------------------------------------------------------ verify_log


def verify_report(report, repair: bool) -> str:
    """``manage.py verify_log``: one line per partition, then each damaged range with what a
    repair cuts (or, with --repair, what it cut), then a summary."""
    lines = []
    for p in report.partitions:
        state = (
            "OK"
            if p.ok and not p.repaired
            else (
                f"{len(p.repaired)} damaged range{'s' * (len(p.repaired) != 1)} repaired"
                if p.repaired
                else f"{len(p.damaged)} damaged range{'s' * (len(p.damaged) != 1)}"
            )
        )
        lines.append(
            f"{p.topic}-{p.partition}: {p.segments} segment{'s' * (p.segments != 1)}, "
            f"{p.batches:,} batch{'es' * (p.batches != 1)}, {p.size_bytes:,} bytes: {state}"
        )
        for r in p.damaged:
            lines.append(f"  DAMAGED  {r.describe()}")
            lines.append(f"    repair would {_cut_text(r)}")
        for r in p.repaired:
            lines.append(f"  REPAIRED {r.describe()}")
            lines.append(f"    {_cut_text(r)}")
    damaged, repaired = report.damaged, report.repaired
    partitions = len(report.partitions)
    if repaired:
        lost = sum(r.offset_count for _, r in repaired)
        lines.append(
            f"Repaired {len(repaired)} damaged range{'s' * (len(repaired) != 1)}: "
            f"{lost:,} offset{'s' * (lost != 1)} lost, every other record kept (audited)."
        )
    elif damaged:
        count = len({(p.topic, p.partition) for p, _ in damaged})
        lines.append(
            f"{len(damaged)} damaged range{'s' * (len(damaged) != 1)} in {count} of {partitions} "
            "partitions; reads there answer CORRUPT_MESSAGE. "
            + ("" if repair else "Run again with --repair (the server stopped) to cut them out.")
        )
    else:
        lines.append(f"All {partitions} partition{'s' * (partitions != 1)} verified: no damage.")
    return "\n".join(lines)


def _cut_text(r) -> str:
    what = (
        f"cut bytes {r.start:,}..{r.end - 1:,} ({r.byte_count:,} bytes) of {r.file}"
        if r.byte_count
        else f"cut nothing from {r.file} (the bytes are missing)"
    )
    lost = (
        f"{r.offsets_text()} {'are' if r.offset_count > 1 else 'is'} lost"
        if r.offset_count > 0
        else "no offset is lost"
    )
    return f"{what}; {lost}; the batches before and after keep their offsets"
