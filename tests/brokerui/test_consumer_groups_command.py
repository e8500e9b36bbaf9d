"""``manage.py consumer_groups``: Kafka's kafka-consumer-groups.sh over a Tidelog data dir.

The data is written through the streams API into a temporary data directory (the
``TIDELOG_DATA_DIR`` setting), the store is closed, and the command opens it as it would from a
shell. Tests that need a group with live members share one in-process engine with the command by
replacing its ``open_engine`` (members live in memory and never survive a store restart, so a
separate process can never see a non-Empty group).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from brokerui.console.groups.services import busy_reason
from brokerui.console.management.commands import consumer_groups as command_module
from streams.client import Consumer
from streams.groups import GroupCoordinator
from streams.log import LogStore, ProducerRecord

REPO = Path(__file__).resolve().parents[2]
MINUTE = 60_000
SIZES = {0: 10, 1: 20, 2: 30}  # records per partition of "orders"
BILLING = {("orders", 0): 5, ("orders", 1): 20, ("audit", 0): 2}


# ------------------------------------------------------------------------------ fixtures


@contextlib.contextmanager
def engine(path):
    store = LogStore.open(path, background=False)
    coordinator = GroupCoordinator(store)
    coordinator.load()
    try:
        yield store, coordinator
    finally:
        coordinator.close()
        store.close()


@pytest.fixture
def base_ms():
    """The timestamp of every partition's first record of `orders`: an hour ago."""
    return int(time.time() * 1000) - 60 * MINUTE


@pytest.fixture
def data_dir(settings, tmp_path, base_ms, db):
    """orders (3 partitions: 10, 20, 30 records, one a minute from an hour ago), audit (1
    partition, 5 records); group billing with BILLING's offsets, group idle with orders-2 at 1.
    Closed again, so the command can take the directory's lock."""
    path = tmp_path / "data"
    settings.TIDELOG_DATA_DIR = path
    base = base_ms
    with engine(path) as (store, coordinator):
        store.create_topic("orders", 3)
        store.create_topic("audit", 1)
        for p, n in SIZES.items():
            recs = [ProducerRecord(b"v%d" % i, None, (), base + i * MINUTE) for i in range(n)]
            store.append_batch("orders", recs, partition=p)
        store.append_batch("audit", [ProducerRecord(b"a")] * 5, partition=0)
        coordinator.commit_offsets("billing", BILLING)
        coordinator.commit_offsets("idle", {("orders", 2): 1})
    return path


def committed(path, group: str) -> dict[tuple[str, int], int]:
    with engine(path) as (_, coordinator):
        return {tp: c.offset for tp, c in coordinator.committed(group).items()}


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("consumer_groups", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def fails(*args: str) -> str:
    with pytest.raises(CommandError) as info:
        run(*args)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def rows(output: str, first: str = "GROUP") -> list[dict[str, str]]:
    """The table that starts at the line beginning with `first`, as dicts by column."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    header = re.split(r"\s{2,}", lines[start].strip())
    out = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        out.append(dict(zip(header, cells, strict=True)))
    return out


def new_offsets(output: str) -> dict[tuple[str, int], int]:
    return {(r["TOPIC"], int(r["PARTITION"])): int(r["NEW-OFFSET"]) for r in rows(output)}


class LiveGroup:
    """Consumers of group `live` on `orders`, each polling in its own thread (a rebalance
    needs every member to rejoin, as separate processes would). Auto-commit is off, so the
    committed offsets stay what the test set."""

    def __init__(self, store, coordinator):
        self.store, self.coordinator = store, coordinator
        self.consumers: list[Consumer] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def add(self, client_id: str) -> Consumer:
        c = Consumer(
            self.store,
            self.coordinator,
            "live",
            client_id=client_id,
            enable_auto_commit=False,
            heartbeat_interval_ms=20,
        )
        c.subscribe(["orders"])
        self.consumers.append(c)
        t = threading.Thread(target=self._poll, args=(c,), daemon=True)
        self._threads.append(t)
        t.start()
        return c

    def _poll(self, c: Consumer) -> None:
        while not self._stop.is_set():
            c.poll(20)

    def wait_stable(self) -> None:
        """Until every consumer is a member of one Stable generation owning all 3 partitions."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            desc = self.coordinator.describe_group("live")
            ids = {c.member_id for c in self.consumers}
            owned = sorted(tp for c in self.consumers for tp in c.assignment())
            if (
                desc.state == "Stable"
                and {m.member_id for m in desc.members} == ids
                and all(c.generation == desc.generation for c in self.consumers)
                and owned == [("orders", 0), ("orders", 1), ("orders", 2)]
            ):
                return
            time.sleep(0.01)
        raise AssertionError("group live did not stabilise")

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        for c in self.consumers:
            c.close(autocommit=False)


@pytest.fixture
def live(data_dir, monkeypatch):
    """An engine shared with the command, where group `live` has two consumers on `orders`
    (3 partitions: one owns 2, the other 1) and a committed offset on orders-0."""
    with engine(data_dir) as (store, coordinator):
        coordinator.commit_offsets("live", {("orders", 0): 4})
        group = LiveGroup(store, coordinator)
        try:
            group.add("c0")
            group.add("c1")
            group.wait_stable()

            @contextlib.contextmanager
            def shared(_path):
                yield store, coordinator

            monkeypatch.setattr(command_module, "open_engine", shared)
            yield group
        finally:
            group.close()


# ------------------------------------------------------------------------------ --list


def test_list_prints_group_ids(data_dir):
    assert run("--list").splitlines() == ["billing", "idle"]


def test_list_with_state_and_filter(data_dir, live):
    assert rows(run("--list", "--state")) == [
        {"GROUP": "billing", "STATE": "Empty"},
        {"GROUP": "idle", "STATE": "Empty"},
        {"GROUP": "live", "STATE": "Stable"},
    ]
    assert [r["GROUP"] for r in rows(run("--list", "--state", "stable"))] == ["live"]
    assert "unknown group state 'Sleeping'" in fails("--list", "--state", "Sleeping")


def test_list_of_an_empty_data_dir(settings, tmp_path):
    settings.TIDELOG_DATA_DIR = tmp_path / "fresh"
    assert run("--list") == ""


# ------------------------------------------------------------------------------ --describe


def test_describe_prints_kafkas_columns_and_values(data_dir):
    out = run("--describe", "--group", "billing")
    assert out.splitlines()[0] == "Consumer group 'billing' has no active members."
    header = out.splitlines()[1].split()
    assert header == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert rows(out) == [
        {
            "GROUP": "billing",
            "TOPIC": "audit",
            "PARTITION": "0",
            "CURRENT-OFFSET": "2",
            "LOG-END-OFFSET": "5",
            "LAG": "3",
            "CONSUMER-ID": "-",
            "HOST": "-",
            "CLIENT-ID": "-",
        },
        {
            "GROUP": "billing",
            "TOPIC": "orders",
            "PARTITION": "0",
            "CURRENT-OFFSET": "5",
            "LOG-END-OFFSET": "10",
            "LAG": "5",
            "CONSUMER-ID": "-",
            "HOST": "-",
            "CLIENT-ID": "-",
        },
        {
            "GROUP": "billing",
            "TOPIC": "orders",
            "PARTITION": "1",
            "CURRENT-OFFSET": "20",
            "LOG-END-OFFSET": "20",
            "LAG": "0",
            "CONSUMER-ID": "-",
            "HOST": "-",
            "CLIENT-ID": "-",
        },
    ]
    assert "Warning" not in out


def test_describe_flags_offsets_fallen_behind_retention(data_dir):
    with engine(data_dir) as (store, _):
        store.delete_records("orders", {0: 8})  # billing's committed 5 is gone now
    out = run("--describe", "--group", "billing")
    row = next(r for r in rows(out) if r["TOPIC"] == "orders" and r["PARTITION"] == "0")
    assert (row["CURRENT-OFFSET"], row["LAG"]) == ("5", "2")  # lag counts what still exists
    warnings = [line for line in out.splitlines() if line.startswith("Warning")]
    assert len(warnings) == 1
    assert "orders-0: committed offset 5 is below the log start offset 8" in warnings[0]
    assert "fallen behind retention" in warnings[0]


def test_describe_live_group_shows_members_and_idle_ones(live):
    live.add("c2")
    live.add("c3")  # 4 members for 3 partitions: one stays idle
    live.wait_stable()
    out = run("--describe", "--group", "live")
    assert "no active members" not in out
    table = rows(out)
    by_member = {c.member_id: c for c in live.consumers}
    assigned = [r for r in table if r["TOPIC"] != "-"]
    assert sorted((r["TOPIC"], r["PARTITION"]) for r in assigned) == [
        ("orders", "0"),
        ("orders", "1"),
        ("orders", "2"),
    ]
    for r in assigned:
        owner = by_member[r["CONSUMER-ID"]]
        assert (r["TOPIC"], int(r["PARTITION"])) in owner.assignment()
        assert r["CLIENT-ID"] == owner.client_id and r["HOST"] == owner.host
    (idle_row,) = [r for r in table if r["TOPIC"] == "-"]
    (idle,) = [c for c in live.consumers if not c.assignment()]
    assert (idle_row["CONSUMER-ID"], idle_row["CLIENT-ID"]) == (idle.member_id, idle.client_id)
    assert idle_row["PARTITION"] == idle_row["LAG"] == idle_row["CURRENT-OFFSET"] == "-"
    p0 = next(r for r in assigned if r["PARTITION"] == "0")
    assert (p0["CURRENT-OFFSET"], p0["LOG-END-OFFSET"], p0["LAG"]) == ("4", "10", "6")
    p1 = next(r for r in assigned if r["PARTITION"] == "1")
    assert p1["CURRENT-OFFSET"] == p1["LAG"] == "-"  # assigned, never committed


def test_describe_members_and_state(live):
    consumers = live.consumers
    out = run("--describe", "--group", "live", "--members", "--verbose")
    table = rows(out)
    assert [r["CLIENT-ID"] for r in sorted(table, key=lambda r: r["CLIENT-ID"])] == ["c0", "c1"]
    assert sorted(int(r["#PARTITIONS"]) for r in table) == [1, 2]
    by_client = {r["CLIENT-ID"]: r for r in table}
    for c in consumers:
        parts = ",".join(str(p) for _, p in c.assignment())
        assert by_client[c.client_id]["ASSIGNMENT"] == f"orders({parts})"
        assert by_client[c.client_id]["CONSUMER-ID"] == c.member_id
    state = rows(run("--describe", "--group", "live", "--state"))
    assert state == [
        {
            "GROUP": "live",
            "COORDINATOR (ID)": "-",
            "ASSIGNMENT-STRATEGY": "range",
            "STATE": "Stable",
            "#MEMBERS": "2",
        }
    ]


def test_describe_members_of_an_empty_group(data_dir):
    out = run("--describe", "--group", "billing", "--members")
    assert out.strip() == "Consumer group 'billing' has no active members."


def test_describe_several_groups(data_dir):
    out = run("--describe", "--group", "billing", "--group", "idle")
    assert [r["GROUP"] for r in rows(out)] == ["billing"] * 3
    idle_part = out[out.index("'idle'") :]
    assert rows(idle_part) == [
        {
            "GROUP": "idle",
            "TOPIC": "orders",
            "PARTITION": "2",
            "CURRENT-OFFSET": "1",
            "LOG-END-OFFSET": "30",
            "LAG": "29",
            "CONSUMER-ID": "-",
            "HOST": "-",
            "CLIENT-ID": "-",
        }
    ]


def test_describe_unknown_group(data_dir):
    assert fails("--describe", "--group", "nope") == "Consumer group 'nope' does not exist."


# ------------------------------------------------------------------------------ --reset-offsets


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def strategies(base_ms: int, tmp_path: Path):
    offsets_file = tmp_path / "offsets.csv"
    offsets_file.write_text("topic,partition,offset\norders,0,7\naudit,0,100\n")
    all3 = lambda a, b, c: {("orders", 0): a, ("orders", 1): b, ("orders", 2): c}  # noqa: E731
    return {
        "to-earliest": (["--topic", "orders", "--to-earliest"], all3(0, 0, 0)),
        "to-latest": (["--topic", "orders", "--to-latest"], all3(10, 20, 30)),
        "to-current": (["--topic", "orders", "--to-current"], all3(5, 20, 30)),
        "to-offset": (["--topic", "orders", "--to-offset", "7"], all3(7, 7, 7)),
        # the first record at or after base + 3 minutes is offset 3 in every partition
        "to-datetime": (
            ["--topic", "orders", "--to-datetime", _iso(base_ms + 3 * MINUTE)],
            all3(3, 3, 3),
        ),  # noqa: E501
        "to-datetime-zone": (
            ["--topic", "orders:1", "--to-datetime", _iso(base_ms + 3 * MINUTE + 1)],
            {("orders", 1): 4},
        ),
        # now - 55m30s is base + 4m30s: offset 5 everywhere
        "by-duration": (["--topic", "orders", "--by-duration", "PT55M30S"], all3(5, 5, 5)),
        "shift-by": (
            ["--topic", "orders:0,1", "--shift-by", "-2"],
            {("orders", 0): 3, ("orders", 1): 18},
        ),  # noqa: E501
        "from-file": (["--from-file", str(offsets_file)], {("orders", 0): 7, ("audit", 0): 5}),
        "all-topics": (
            ["--all-topics", "--to-latest"],
            {("orders", 0): 10, ("orders", 1): 20, ("audit", 0): 5},
        ),
        "several-topics": (
            ["--topic", "audit", "--topic", "orders:1", "--to-earliest"],
            {("audit", 0): 0, ("orders", 1): 0},
        ),
    }


STRATEGY_CASES = [
    "to-earliest",
    "to-latest",
    "to-current",
    "to-offset",
    "to-datetime",
    "to-datetime-zone",
    "by-duration",
    "shift-by",
    "from-file",
    "all-topics",
    "several-topics",
]


@pytest.mark.parametrize("case", STRATEGY_CASES)
def test_reset_dry_run_then_execute(data_dir, base_ms, tmp_path, case):
    args, expected = strategies(base_ms, tmp_path)[case]
    base = ["--reset-offsets", "--group", "billing", *args]

    dry = run(*base)  # --dry-run is the default
    assert new_offsets(dry) == expected
    assert "Dry run: nothing was changed" in dry
    assert committed(data_dir, "billing") == BILLING
    assert new_offsets(run(*base, "--dry-run")) == expected

    done = run(*base, "--execute")
    assert new_offsets(done) == expected
    assert "Reset the offsets of group 'billing'" in done
    assert committed(data_dir, "billing") == {**BILLING, **expected}


def test_reset_output_keeps_kafkas_columns_first_and_counts(data_dir):
    out = run("--reset-offsets", "--group", "billing", "--topic", "orders", "--to-offset", "3")
    header = out.splitlines()[0].split()
    assert header[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert header[4:] == ["CURRENT-OFFSET", "REPLAY", "SKIP", "NOTE"]
    table = {r["PARTITION"]: r for r in rows(out)}
    assert (table["0"]["CURRENT-OFFSET"], table["0"]["REPLAY"], table["0"]["SKIP"]) == (
        "5",
        "2",
        "0",
    )
    assert (table["1"]["REPLAY"], table["1"]["SKIP"]) == ("17", "0")
    assert (table["2"]["CURRENT-OFFSET"], table["2"]["REPLAY"], table["2"]["SKIP"]) == (
        "-",
        "-",
        "-",
    )
    assert "would move 3 partitions (19 records to replay, 0 to skip)" in out


def test_reset_shows_clamping(data_dir):
    out = run("--reset-offsets", "--group", "billing", "--topic", "orders:0", "--to-offset", "99")
    (row,) = rows(out)
    assert row["NEW-OFFSET"] == "10"
    assert row["NOTE"] == "clamped: 99 is past the log end offset 10"
    assert row["SKIP"] == "5"
    with engine(data_dir) as (store, _):
        store.delete_records("orders", {1: 6})
    out = run("--reset-offsets", "--group", "billing", "--topic", "orders:1", "--shift-by", "-30")
    (row,) = rows(out)
    assert row["NEW-OFFSET"] == "6"
    assert row["NOTE"] == "clamped: -10 is below the log start offset 6"


def test_reset_export_prints_a_file_for_from_file(data_dir, tmp_path):
    out = io.StringIO()
    err = io.StringIO()
    call_command(
        "consumer_groups",
        "--reset-offsets",
        "--group",
        "billing",
        "--all-topics",
        "--shift-by",
        "1",
        "--export",
        stdout=out,
        stderr=err,
    )
    assert out.getvalue().splitlines() == ["audit,0,3", "orders,0,6", "orders,1,20"]
    assert "Dry run" in err.getvalue()
    exported = tmp_path / "exported.csv"
    exported.write_text(out.getvalue())
    run("--reset-offsets", "--group", "other", "--from-file", str(exported), "--execute")
    assert committed(data_dir, "other") == {("audit", 0): 3, ("orders", 0): 6, ("orders", 1): 20}


def test_reset_of_a_new_group_says_it_creates_it(data_dir):
    out = run("--reset-offsets", "--group", "fresh", "--topic", "audit", "--to-earliest")
    assert "consumer group 'fresh' did not exist" in out
    assert committed(data_dir, "fresh") == {}
    run("--reset-offsets", "--group", "fresh", "--topic", "audit", "--to-earliest", "--execute")
    assert committed(data_dir, "fresh") == {("audit", 0): 0}
    assert "fresh" in run("--list").split()


def test_reset_execute_is_refused_while_the_group_has_members(live):
    coordinator, consumers = live.coordinator, live.consumers
    before = coordinator.committed("live")
    args = ["--reset-offsets", "--group", "live", "--topic", "orders", "--to-earliest"]
    dry = run(*args)
    # the console's and the API's wording (one place: the groups service)
    assert f"Warning: {busy_reason('Stable')} --execute is refused until then." in dry
    message = fails(*args, "--execute")
    assert message.startswith("consumer group 'live' is Stable, not Empty: active members ")
    for c in consumers:
        assert c.member_id in message
    assert coordinator.committed("live") == before


# ------------------------------------------------------------------------------ deletes


def test_delete_group(data_dir):
    out = run("--delete", "--group", "billing")
    assert out.strip() == "Deletion of requested consumer groups ('billing') was successful."
    assert run("--list").splitlines() == ["idle"]
    assert committed(data_dir, "billing") == {}


def test_delete_unknown_and_live_groups(live):
    assert "Group 'nope' could not be deleted: it does not exist" in fails(
        "--delete", "--group", "nope"
    )
    message = fails("--delete", "--group", "live")
    assert "Group 'live' could not be deleted: consumer group 'live' is Stable" in message
    out = io.StringIO()
    with pytest.raises(CommandError):  # the deletable one goes, the error is still reported
        call_command(
            "consumer_groups", "--delete", "--group", "idle", "--group", "live", stdout=out
        )
    assert "('idle') was successful" in out.getvalue()
    assert [g for g, _ in live.coordinator.list_groups()] == ["billing", "live"]


def test_delete_offsets_of_one_topic(data_dir):
    out = run("--delete-offsets", "--group", "billing", "--topic", "orders")
    assert out.splitlines()[0] == (
        "Request succeed for deleting offsets with topic orders group billing"
    )
    assert rows(out, "TOPIC") == [
        {"TOPIC": "orders", "PARTITION": "0", "STATUS": "Successful"},
        {"TOPIC": "orders", "PARTITION": "1", "STATUS": "Successful"},
    ]
    assert committed(data_dir, "billing") == {("audit", 0): 2}


def test_delete_offsets_errors(data_dir):
    assert fails("--delete-offsets", "--group", "billing", "--topic", "nope") == (
        "topic 'nope' does not exist"
    )
    assert fails("--delete-offsets", "--group", "idle", "--topic", "audit") == (
        "consumer group 'idle' has no committed offsets for topic 'audit'"
    )
    assert fails("--delete-offsets", "--group", "ghost", "--topic", "audit") == (
        "Consumer group 'ghost' does not exist."
    )
    assert "drop the partition list" in fails(
        "--delete-offsets", "--group", "billing", "--topic", "orders:0"
    )
    assert fails("--delete-offsets", "--group", "billing") == "--delete-offsets needs --topic T"


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "one of the arguments --list --describe --reset-offsets --delete"),
        (["--list", "--describe"], "not allowed with argument --list"),
        (["--describe"], "--describe needs --group G"),
        (["--list", "--to-latest"], "--to-latest can only be used with --reset-offsets"),
        (["--describe", "--group", "billing", "--execute"], "--execute can only be used with"),
        (["--describe", "--group", "billing", "--members", "--state"], "choose one of"),
        (["--describe", "--group", "billing", "--verbose"], "--verbose can only be used with"),
        (["--reset-offsets", "--group", "billing", "--to-latest"], "needs a scope"),
        (["--reset-offsets", "--group", "billing", "--all-topics"], "needs a strategy"),
        (
            ["--reset-offsets", "--group", "billing", "--all-topics", "--topic", "orders"],
            "either --all-topics or --topic",
        ),
        (
            ["--reset-offsets", "--group", "billing", "--all-topics", "--to-offset", "x"],
            "--to-offset needs a whole number, got 'x'",
        ),
        (
            ["--reset-offsets", "--group", "billing", "--all-topics", "--to-offset", "-1"],
            "--to-offset must be >= 0",
        ),
        (
            ["--reset-offsets", "--group", "billing", "--all-topics", "--by-duration", "1h"],
            "'1h' is not an ISO-8601 duration",
        ),
        (
            ["--reset-offsets", "--group", "billing", "--all-topics", "--to-datetime", "May"],
            "'May' is not a date-time",
        ),
        (
            ["--reset-offsets", "--group", "billing", "--from-file", "/nonexistent.csv"],
            "cannot read /nonexistent.csv",
        ),
        (
            [
                "--reset-offsets",
                "--group",
                "billing",
                "--all-topics",
                "--to-latest",
                "--to-current",
            ],
            "not allowed with argument",
        ),
        (
            ["--reset-offsets", "--group", "billing", "--topic", "nope", "--to-latest"],
            "topic 'nope' does not exist",
        ),
        (
            ["--reset-offsets", "--group", "billing", "--topic", "orders:7", "--to-latest"],
            "topic 'orders' has no partition 7",
        ),
        (
            ["--reset-offsets", "--group", "billing", "--topic", "orders:x", "--to-latest"],
            "bad partition list",
        ),
        (
            ["--reset-offsets", "--group", "ghost", "--all-topics", "--to-latest"],
            "the group has no committed offsets",
        ),
        (
            ["--reset-offsets", "--group", "idle", "--topic", "orders", "--shift-by", "1"],
            "orders-0 has no committed offset to shift from",
        ),
        (
            ["--reset-offsets", "--group", "a", "--group", "b", "--all-topics", "--to-latest"],
            "--reset-offsets takes exactly one --group",
        ),
    ],
)
def test_bad_input_is_one_clear_line(data_dir, args, expected):
    assert expected in fails(*args)


def test_bad_input_changes_nothing(data_dir):
    fails(
        "--reset-offsets", "--group", "billing", "--topic", "orders:7", "--to-latest", "--execute"
    )
    assert committed(data_dir, "billing") == BILLING


# ------------------------------------------------------------------------------ the lock


def test_a_locked_data_dir_names_the_server_pid(data_dir):
    with LogStore.open(data_dir, background=False):  # the running server holds the directory
        message = fails("--list")
    pid = os.getpid()
    assert f"is in use by the running server (pid {pid})" in message
    assert f"stop the server (pid {pid}) or point TIDELOG_DATA_DIR at another" in message


def _manage(data_dir, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TIDELOG_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "manage.py", "consumer_groups", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_exit_status_from_a_shell(data_dir):
    ok = _manage(data_dir, "--describe", "--group", "billing")
    assert ok.returncode == 0, ok.stderr
    assert [r["LAG"] for r in rows(ok.stdout)] == ["3", "5", "0"]
    assert ok.stderr == ""  # the engine's INFO logging stays quiet

    bad = _manage(data_dir, "--describe", "--group", "nope")
    assert bad.returncode == 1
    assert bad.stderr.strip() == "CommandError: Consumer group 'nope' does not exist."

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from streams.log import LogStore; "
            f"s = LogStore.open({str(data_dir)!r}, background=False); "
            "print('ready', flush=True); sys.stdin.read(); s.close()",
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        locked = _manage(data_dir, "--list")
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()
    assert locked.returncode == 1
    (line,) = locked.stderr.strip().splitlines()
    assert f"stop the server (pid {holder.pid})" in line


def test_offsets_of_a_deleted_topic(data_dir):
    with engine(data_dir) as (store, _):
        store.delete_topic("audit")
    out = run("--describe", "--group", "billing")
    assert [r["TOPIC"] for r in rows(out)] == ["orders", "orders"]
    assert "committed offsets for topic 'audit', which no longer exists" in out
    # --all-topics skips the deleted topic's leftover offsets (they cannot be reset)
    out = run("--reset-offsets", "--group", "billing", "--all-topics", "--to-earliest")
    assert new_offsets(out) == {("orders", 0): 0, ("orders", 1): 0}
    run("--delete-offsets", "--group", "billing", "--topic", "audit")
    out = run("--reset-offsets", "--group", "billing", "--all-topics", "--to-earliest")
    assert new_offsets(out) == {("orders", 0): 0, ("orders", 1): 0}


@pytest.mark.django_db
def test_changes_from_the_command_line_are_audited(data_dir):
    from brokerui.audit.models import AuditEntry

    run("--reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest", "--execute")
    entry = AuditEntry.objects.get(action="group.reset")
    assert entry.source == "cli" and entry.username.startswith("cli:")
    assert entry.target == "group billing" and entry.after["offsets"]["orders"]["0"] == 0
    with engine(data_dir) as (store, _):
        audit = store.read("__audit", 0, 0)
    assert b'"group.reset"' in audit[-1].value
