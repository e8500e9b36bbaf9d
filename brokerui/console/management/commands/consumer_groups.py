"""``manage.py consumer_groups``: Kafka's ``kafka-consumer-groups.sh``, through a running broker
(``--bootstrap-server``) or over Tidelog's data dir while the server is stopped.

    consumer_groups [--bootstrap-server HOST:PORT[,HOST:PORT] [--command-config FILE]] ACTION ...

    consumer_groups --list [--state [STATE,...]]
    consumer_groups --describe --group G [--group G2 ...] [--offsets | --members [--verbose]
                    | --state]
    consumer_groups --reset-offsets --group G (--all-topics | --topic T[:P,P...] ...)
                    (--to-earliest | --to-latest | --to-current | --to-offset N
                     | --to-datetime T | --by-duration D | --shift-by N | --from-file F)
                    [--dry-run (default) | --execute] [--export]
    consumer_groups --delete --group G [--group G2 ...]
    consumer_groups --delete-offsets --group G --topic T [--topic T2 ...]

With ``--bootstrap-server`` the command talks to a broker over the Kafka protocol, as Kafka's
tool does (``KafkaCluster``: Tidelog's own listener while the server runs, or any Kafka-protocol
cluster); resets are committed by its admin client, which a Tidelog broker refuses while the
group has members. Without it, the command opens the data directory itself
(``TIDELOG_DATA_DIR``), which only works while the server is stopped: the directory has one owner
at a time, and a running server's lock is reported with its pid (and the hint to use
``--bootstrap-server``). Either way the actions go through the same ``Cluster`` interface and
the group services the console and the API call, and changes are audited with source ``cli``
(through a broker: in the database; the broker's Kafka port records the admin client's commit
too). Errors end with a one-line message and exit status 1.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from brokerui.audit.services import Actor, AuditLog, AuditSink
from brokerui.console import cli_format as fmt
from brokerui.console.groups import services
from streams.cluster import Cluster, LocalCluster
from streams.cluster.connection import load_client_properties
from streams.errors import (
    DataDirLocked,
    InvalidConfig,
    TidelogError,
    UnknownGroup,
    UnknownTopic,
)
from streams.groups import GroupCoordinator, GroupState, ResetScope, ResetStrategy
from streams.log import LogStore

ACTIONS = ("list", "describe", "reset_offsets", "delete", "delete_offsets")
CLIENT_ID = "tidelog-consumer-groups"  # how the broker (and its audit of the commit) names us
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
            "go through it with --bootstrap-server HOST:PORT (its Kafka listener), or stop the "
            f"server ({holder}) or point TIDELOG_DATA_DIR at another data directory, then run "
            "the command again"
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


@contextlib.contextmanager
def open_cluster(
    bootstrap: str | None, data_dir, client_config: dict[str, str] | None = None
) -> Iterator[tuple[Cluster, AuditSink]]:
    """The Cluster the actions run on, and where their audit records go: a running broker over
    the Kafka protocol (`bootstrap`: ``host:port[,host:port]``, with `client_config`; the
    database's audit log), or the stopped server's data directory (its ``__audit`` topic and
    the database)."""
    if bootstrap:
        from confluent_kafka import KafkaException

        from streams.cluster.kafka import KafkaCluster, parse_cluster_url

        try:
            servers = parse_cluster_url(f"kafka://{bootstrap}")
        except InvalidConfig:
            raise CommandError(
                f"--bootstrap-server {bootstrap!r} is not HOST:PORT[,HOST:PORT...]"
            ) from None
        try:
            cluster = KafkaCluster(
                servers, client_config={"client.id": CLIENT_ID, **(client_config or {})}
            )
        except KafkaException as exc:  # a property the client does not know
            raise CommandError(f"--command-config: {exc.args[0].str()}") from None
        try:
            yield cluster, AuditLog(None)
        finally:
            cluster.close()
        return
    with open_engine(data_dir) as (store, coordinator):
        yield LocalCluster(store, coordinator), AuditLog(store)


class Command(BaseCommand):
    help = (
        "List, describe, reset offsets of and delete consumer groups, with the options and "
        "output columns of Kafka's kafka-consumer-groups.sh: through a running broker with "
        "--bootstrap-server HOST:PORT, else over TIDELOG_DATA_DIR with the server stopped (the "
        "data directory has one owner at a time)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--bootstrap-server",
            metavar="HOST:PORT",
            help="A running broker's Kafka listener (host:port[,host:port]); without it the "
            "command opens TIDELOG_DATA_DIR, which needs the server stopped.",
        )
        parser.add_argument(
            "--command-config",
            metavar="FILE",
            help="With --bootstrap-server: client properties (key=value lines, librdkafka's "
            "names), e.g. security.protocol, sasl.mechanism, sasl.username, sasl.password, "
            "ssl.ca.location; a value may be ${env:NAME} or ${file:/path}.",
        )
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
            bootstrap, config_file = options["bootstrap_server"], options["command_config"]
            if config_file and not bootstrap:
                raise CommandError("--command-config can only be used with --bootstrap-server")
            client_config = (
                load_client_properties(config_file, what="--command-config")
                if config_file
                else None
            )
            source = open_cluster(bootstrap, settings.TIDELOG_DATA_DIR, client_config)
            with source as (cluster, sink):
                getattr(self, f"_{action}")(cluster, sink, options)
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

    def _list(self, cluster: Cluster, sink: AuditSink, options) -> None:
        groups = [(g.group_id, g.state) for g in cluster.list_groups()]
        wanted = options["state"]
        if wanted:
            known = {str(s.value).lower(): str(s.value) for s in GroupState}
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

    def _describe(self, cluster: Cluster, sink: AuditSink, options) -> None:
        for i, group in enumerate(options["group"]):
            try:
                detail = cluster.describe_group(group)
            except UnknownGroup:
                raise CommandError(f"Consumer group '{group}' does not exist.") from None
            description, lag = detail.description, detail.lag
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
            self.stdout.write(fmt.describe_offsets(description, lag))
            warnings = fmt.retention_warnings(lag) + fmt.deleted_topic_warnings(
                group, detail.deleted_topics
            )
            if warnings:
                self.stdout.write("\n" + "\n".join(warnings))

    def _reset_offsets(self, cluster: Cluster, sink: AuditSink, options) -> None:
        group = options["group"][0]
        strategy = self._strategy(options)
        scopes = self._scopes(options, strategy)
        try:  # one plan over every scope (several --topic flags), committed in one write
            done = services.group_reset(
                cluster=cluster,
                sink=sink,
                actor=Actor.cli(),
                group_id=group,
                strategy=strategy,
                scopes=scopes,
                execute=options["execute"],  # GroupNotEmpty unless Empty, checked at commit
            )
        except UnknownTopic as exc:
            if not options["all_topics"]:
                raise
            raise CommandError(
                f"consumer group '{group}' has offsets for topic '{exc.topic}', which no longer "
                f"exists: remove them with --delete-offsets --group {group} --topic {exc.topic}, "
                "or name the topics with --topic"
            ) from None
        plan = done.plan
        notes = []
        if not done.existed:
            verb = "was created" if done.executed else "will be created by --execute"
            notes.append(f"Note: consumer group '{group}' did not exist; its offsets {verb}.")
        busy = services.busy_reason(plan.group_state)
        if not done.executed and busy:
            notes.append(f"Warning: {busy} --execute is refused until then.")
        notes.append(fmt.reset_summary(plan, executed=done.executed))
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

    def _delete(self, cluster: Cluster, sink: AuditSink, options) -> None:
        deleted, failed = [], []
        for group in options["group"]:
            try:
                services.group_delete(cluster=cluster, sink=sink, actor=Actor.cli(), group_id=group)
                deleted.append(group)
            except UnknownGroup:
                failed.append(f"Group '{group}' could not be deleted: it does not exist")
            except TidelogError as exc:
                failed.append(f"Group '{group}' could not be deleted: {exc}")
        if deleted:
            self.stdout.write(fmt.deleted_groups(deleted))
        if failed:
            raise CommandError("; ".join(failed))

    def _delete_offsets(self, cluster: Cluster, sink: AuditSink, options) -> None:
        group = options["group"][0]
        try:
            detail = cluster.describe_group(group)
        except UnknownGroup:
            raise CommandError(f"Consumer group '{group}' does not exist.") from None
        committed = {p.topic for p in detail.lag.partitions if p.committed is not None}
        committed |= set(detail.deleted_topics)
        topics = []
        for spec in options["topic"]:
            topic, _, parts = spec.partition(":")
            if parts:
                raise CommandError(
                    f"--delete-offsets deletes a whole topic's offsets; drop the partition "
                    f"list from {spec!r}"
                )
            if topic not in committed:
                try:
                    cluster.describe_topic(topic)
                except UnknownTopic:
                    raise CommandError(f"topic {topic!r} does not exist") from None
                raise CommandError(
                    f"consumer group '{group}' has no committed offsets for topic '{topic}'"
                )
            topics.append(topic)
        for i, topic in enumerate(dict.fromkeys(topics)):
            doomed = services.group_offsets_delete(
                cluster=cluster, sink=sink, actor=Actor.cli(), group_id=group, topic=topic
            )
            if i:
                self.stdout.write("")
            self.stdout.write(fmt.deleted_offsets(group, topic, doomed))
