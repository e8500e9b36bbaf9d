"""``manage.py consumer_groups``: Kafka's ``kafka-consumer-groups.sh``, over Tidelog's data dir.

    consumer_groups --list [--state [STATE,...]]
    consumer_groups --describe --group G [--group G2 ...] [--offsets | --members [--verbose]
                    | --state]
    consumer_groups --reset-offsets --group G (--all-topics | --topic T[:P,P...] ...)
                    (--to-earliest | --to-latest | --to-current | --to-offset N
                     | --to-datetime T | --by-duration D | --shift-by N | --from-file F)
                    [--dry-run (default) | --execute] [--export]
    consumer_groups --delete --group G [--group G2 ...]
    consumer_groups --delete-offsets --group G --topic T [--topic T2 ...]

The command opens the data directory itself (``TIDELOG_DATA_DIR``), so it runs while the server
is stopped: the directory has one owner at a time, and a running server's lock is reported with
its pid. Errors end with a one-line message and exit status 1.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from brokerui.audit.services import Actor, AuditLog
from brokerui.console import cli_format as fmt
from brokerui.console.groups import services
from streams.cluster import LocalCluster
from streams.errors import (
    DataDirLocked,
    TidelogError,
    UnknownGroup,
    UnknownTopic,
)
from streams.groups import GroupCoordinator, GroupState, ResetScope, ResetStrategy
from streams.groups.lag import group_lag
from streams.log import LogStore

ACTIONS = ("list", "describe", "reset_offsets", "delete", "delete_offsets")
STRATEGY_FLAGS = ("to_earliest", "to_latest", "to_current")
STRATEGY_VALUES = ("to_offset", "to_datetime", "by_duration", "shift_by", "from_file")

# Which action each option belongs to: anything else is refused, as Kafka's tool does.
OPTION_ACTIONS = {
    "group": ("describe", "reset_offsets", "delete", "delete_offsets"),
    "topic": ("reset_offsets", "delete_offsets"),
    "all_topics": ("reset_offsets",),
    "state": ("list", "describe"),
    "members": ("describe",),
    "offsets": ("describe",),
    "verbose": ("describe",),
    "dry_run": ("reset_offsets",),
    "execute": ("reset_offsets",),
    "export": ("reset_offsets",),
    **{name: ("reset_offsets",) for name in STRATEGY_FLAGS + STRATEGY_VALUES},
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@contextlib.contextmanager
def open_engine(data_dir) -> Iterator[tuple[LogStore, GroupCoordinator]]:
    """The data directory's store and a coordinator loaded from ``__consumer_offsets``, with no
    background threads; both closed on exit. (Tests replace this to share an engine.)"""
    try:
        store = LogStore.open(str(data_dir), background=False)
    except DataDirLocked as exc:
        holder = f"pid {exc.pid}" if exc.pid else f"the process holding {exc.path}/.lock"
        raise CommandError(
            f"the data directory {exc.path} is in use by the running server ({holder}): "
            f"stop the server ({holder}) or point TIDELOG_DATA_DIR at another data directory, "
            "then run the command again"
        ) from None
    coordinator = None
    try:
        coordinator = GroupCoordinator(store)
        coordinator.load()
        yield store, coordinator
    finally:
        if coordinator is not None:
            coordinator.close()
        store.close()


class Command(BaseCommand):
    help = (
        "List, describe, reset offsets of and delete consumer groups, with the options and "
        "output columns of Kafka's kafka-consumer-groups.sh. Reads TIDELOG_DATA_DIR; stop the "
        "server first (the data directory has one owner at a time)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--list", action="store_true", help="List all consumer groups.")
        action.add_argument("--describe", action="store_true", help="Describe the group(s).")
        action.add_argument(
            "--reset-offsets",
            action="store_true",
            help="Reset the group's committed offsets (a dry run unless --execute).",
        )
        action.add_argument("--delete", action="store_true", help="Delete Empty group(s).")
        action.add_argument(
            "--delete-offsets",
            action="store_true",
            help="Delete the group's committed offsets for the --topic(s).",
        )

        parser.add_argument(
            "--group", action="append", default=[], metavar="G", help="A group; may be repeated."
        )
        parser.add_argument(
            "--topic",
            action="append",
            default=[],
            metavar="T[:P,P...]",
            help="A topic, optionally with partitions (reset); may be repeated.",
        )
        parser.add_argument(
            "--all-topics", action="store_true", help="Every topic the group has offsets for."
        )
        parser.add_argument(
            "--state",
            nargs="?",
            const="",
            default=None,
            metavar="STATE,...",
            help="--list: show (and optionally filter by) state; --describe: the group state.",
        )
        parser.add_argument("--members", action="store_true", help="Describe the members.")
        parser.add_argument(
            "--offsets", action="store_true", help="Describe offsets and lag (the default)."
        )
        parser.add_argument(
            "--verbose", action="store_true", help="With --members: show the assignment."
        )

        strategy = parser.add_mutually_exclusive_group()
        strategy.add_argument("--to-earliest", action="store_true", help="The log start offset.")
        strategy.add_argument("--to-latest", action="store_true", help="The log end offset.")
        strategy.add_argument(
            "--to-current", action="store_true", help="The committed offset (else the end)."
        )
        strategy.add_argument("--to-offset", metavar="N", help="Offset N.")
        strategy.add_argument(
            "--to-datetime", metavar="T", help="YYYY-MM-DDTHH:mm:SS.sss, optional zone (UTC)."
        )
        strategy.add_argument("--by-duration", metavar="D", help="ISO-8601, e.g. PT1H, P1D.")
        strategy.add_argument("--shift-by", metavar="N", help="Move by N (may be negative).")
        strategy.add_argument("--from-file", metavar="F", help="CSV of topic,partition,offset.")

        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--dry-run", action="store_true", help="Show the plan (the default).")
        mode.add_argument("--execute", action="store_true", help="Commit the plan.")
        parser.add_argument(
            "--export",
            action="store_true",
            help="Print the plan as topic,partition,offset CSV (for --from-file).",
        )

    # ------------------------------------------------------------------ entry point

    def handle(self, *args, **options) -> None:
        action = next(a for a in ACTIONS if options[a])
        self._check_options(action, options)
        quiet = options["verbosity"] < 2
        streams_log = logging.getLogger("streams")
        level = streams_log.level
        if quiet:  # the engine's INFO lines (offsets loaded, ...) are noise in a CLI
            streams_log.setLevel(logging.WARNING)
        try:
            with open_engine(settings.TIDELOG_DATA_DIR) as (store, coordinator):
                getattr(self, f"_{action}")(store, coordinator, options)
        except TidelogError as exc:
            raise CommandError(str(exc)) from None
        finally:
            streams_log.setLevel(level)

    def _check_options(self, action: str, options: dict) -> None:
        for name, allowed in OPTION_ACTIONS.items():
            value = options.get(name)
            given = value not in (None, False, [], ())
            if given and action not in allowed:
                used_with = " or ".join(_flag(a) for a in allowed)
                raise CommandError(f"{_flag(name)} can only be used with {used_with}")
        if action in ("describe", "reset_offsets", "delete", "delete_offsets"):
            if not options["group"]:
                raise CommandError(f"{_flag(action)} needs --group G")
        if action in ("reset_offsets", "delete_offsets") and len(options["group"]) > 1:
            raise CommandError(f"{_flag(action)} takes exactly one --group")
        if action == "describe":
            views = [v for v in ("offsets", "members") if options[v]]
            if options["state"] is not None:
                if options["state"]:
                    raise CommandError("--describe --state takes no value (it is a view)")
                views.append("state")
            if len(views) > 1:
                raise CommandError("choose one of --offsets, --members and --state")
            if options["verbose"] and views != ["members"]:
                raise CommandError("--verbose can only be used with --describe --members")
        if action == "reset_offsets" and options["all_topics"] and options["topic"]:
            raise CommandError("use either --all-topics or --topic, not both")
        if action == "delete_offsets" and not options["topic"]:
            raise CommandError("--delete-offsets needs --topic T")

    # ------------------------------------------------------------------ actions

    def _list(self, store, coordinator, options) -> None:
        groups = coordinator.list_groups()
        wanted = options["state"]
        if wanted:
            known = {str(s).lower(): str(s) for s in GroupState}
            states = set()
            for name in (s.strip() for s in wanted.split(",") if s.strip()):
                if name.lower() not in known:
                    raise CommandError(
                        f"unknown group state {name!r}; use one of {', '.join(known.values())}"
                    )
                states.add(known[name.lower()])
            groups = [(g, s) for g, s in groups if s in states]
        out = fmt.group_list(groups, with_state=wanted is not None)
        if out:
            self.stdout.write(out)

    def _describe(self, store, coordinator, options) -> None:
        for i, group in enumerate(options["group"]):
            try:
                description = coordinator.describe_group(group)
            except UnknownGroup:
                raise CommandError(f"Consumer group '{group}' does not exist.") from None
            if i:
                self.stdout.write("")
            if options["state"] is not None:
                self.stdout.write(fmt.describe_state(description))
                continue
            banner = fmt.state_banner(description)
            if banner:
                self.stdout.write(banner)
            if options["members"]:
                if description.members:
                    self.stdout.write(fmt.describe_members(description, options["verbose"]))
                continue
            lag = group_lag(coordinator, store, group)
            self.stdout.write(fmt.describe_offsets(description, lag))
            warnings = fmt.retention_warnings(lag) + fmt.stale_topic_warnings(
                group, coordinator.committed(group), store.list_topics()
            )
            if warnings:
                self.stdout.write("\n" + "\n".join(warnings))

    def _reset_offsets(self, store, coordinator, options) -> None:
        group = options["group"][0]
        strategy = self._strategy(options)
        scopes = self._scopes(options, strategy)
        exists = any(g == group for g, _ in coordinator.list_groups())
        try:
            plan = self._plan(store, coordinator, group, strategy, scopes)
        except UnknownTopic as exc:
            if not options["all_topics"]:
                raise
            raise CommandError(
                f"consumer group '{group}' has offsets for topic '{exc.topic}', which no longer "
                f"exists: remove them with --delete-offsets --group {group} --topic {exc.topic}, "
                "or name the topics with --topic"
            ) from None
        if options["execute"]:  # GroupNotEmpty unless Empty, checked at commit
            services.group_reset_apply(
                cluster=LocalCluster(store, coordinator),
                sink=AuditLog(store),
                actor=Actor.cli(),
                plan=plan,
            )
        notes = []
        if not exists:
            verb = "was created" if options["execute"] else "will be created by --execute"
            notes.append(f"Note: consumer group '{group}' did not exist; its offsets {verb}.")
        busy = services.busy_reason(plan.group_state)
        if not options["execute"] and busy:
            notes.append(f"Warning: {busy} --execute is refused until then.")
        notes.append(fmt.reset_summary(plan, executed=options["execute"]))
        if options["export"]:  # stdout is the CSV alone, fit for --from-file
            self.stdout.write(fmt.export_csv(plan))
            for note in notes:
                self.stderr.write(note)
            return
        self.stdout.write(fmt.reset_plan(plan))
        self.stdout.write("")
        for note in notes:
            self.stdout.write(note)

    def _strategy(self, options) -> ResetStrategy:
        for name in STRATEGY_FLAGS:
            if options[name]:
                return ResetStrategy.parse(name.replace("_", "-"))
        for name in STRATEGY_VALUES:
            if options[name] is not None:
                return ResetStrategy.parse(name.replace("_", "-"), options[name])
        raise CommandError(
            "--reset-offsets needs a strategy: --to-earliest, --to-latest, --to-current, "
            "--to-offset N, --to-datetime T, --by-duration D, --shift-by N or --from-file F"
        )

    def _scopes(self, options, strategy: ResetStrategy) -> list[ResetScope]:
        if options["all_topics"]:
            return [ResetScope(all_topics=True)]
        if options["topic"]:
            return [ResetScope.parse_topic(spec) for spec in options["topic"]]
        if strategy.kind == "from-file":
            return [ResetScope(all_topics=True)]  # every partition the file names
        raise CommandError("--reset-offsets needs a scope: --all-topics or --topic T[:P,P...]")

    @staticmethod
    def _plan(store, coordinator, group, strategy, scopes):
        """One plan over every scope (several --topic flags), so --execute commits it in one
        atomic write. With --from-file, the scopes filter the file's partitions."""
        return services.group_reset_plan(
            cluster=LocalCluster(store, coordinator),
            group_id=group,
            strategy=strategy,
            scopes=scopes,
        )

    def _delete(self, store, coordinator, options) -> None:
        deleted, failed = [], []
        for group in options["group"]:
            try:
                services.group_delete(
                    cluster=LocalCluster(store, coordinator),
                    sink=AuditLog(store),
                    actor=Actor.cli(),
                    group_id=group,
                )
                deleted.append(group)
            except UnknownGroup:
                failed.append(f"Group '{group}' could not be deleted: it does not exist")
            except TidelogError as exc:
                failed.append(f"Group '{group}' could not be deleted: {exc}")
        if deleted:
            self.stdout.write(fmt.deleted_groups(deleted))
        if failed:
            raise CommandError("; ".join(failed))

    def _delete_offsets(self, store, coordinator, options) -> None:
        group = options["group"][0]
        if not any(g == group for g, _ in coordinator.list_groups()):
            raise CommandError(f"Consumer group '{group}' does not exist.")
        committed = coordinator.committed(group)
        topics = []
        for spec in options["topic"]:
            topic, _, parts = spec.partition(":")
            if parts:
                raise CommandError(
                    f"--delete-offsets deletes a whole topic's offsets; drop the partition "
                    f"list from {spec!r}"
                )
            has_offsets = any(t == topic for t, _ in committed)
            if not has_offsets and topic not in store.list_topics():
                raise CommandError(f"topic {topic!r} does not exist")
            if not has_offsets:
                raise CommandError(
                    f"consumer group '{group}' has no committed offsets for topic '{topic}'"
                )
            topics.append(topic)
        for i, topic in enumerate(dict.fromkeys(topics)):
            doomed = services.group_offsets_delete(
                cluster=LocalCluster(store, coordinator),
                sink=AuditLog(store),
                actor=Actor.cli(),
                group_id=group,
                topic=topic,
            )
            if i:
                self.stdout.write("")
            self.stdout.write(fmt.deleted_offsets(group, topic, doomed))
