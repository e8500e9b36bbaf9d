"""``manage.py verify_log [--topic T] [--repair]``: check every batch of every segment on disk
(Kafka's ``kafka-dump-log --deep-iteration`` idea) and report each damaged range with what a
repair would cut; ``--repair`` cuts the damaged bytes out (their offsets are lost, every other
record is kept) and audits it.

The command opens the data directory itself (``TIDELOG_DATA_DIR``), so it runs while the server
is stopped. Exit status 1 when damage remains (or on an error), 0 otherwise.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from brokerui.console import cli_format as fmt
from brokerui.console.topics.services import log_verify
from streams.errors import TidelogError


class Command(BaseCommand):
    help = (
        "Verify the log on disk: every batch of every segment (framing, CRC-32C, offsets). "
        "Reports each damaged range and what --repair would cut; --repair cuts the damage out "
        "(audited). Reads TIDELOG_DATA_DIR; stop the server first."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("--topic", metavar="T", help="Only this topic (default: every one).")
        parser.add_argument(
            "--repair",
            action="store_true",
            help="Cut each damaged range out of its segment (its offsets are lost).",
        )

    def handle(self, *args, **options) -> None:
        streams_log = logging.getLogger("streams")
        level = streams_log.level
        if options["verbosity"] < 2:  # the report says it all; the engine's lines are noise
            streams_log.setLevel(logging.CRITICAL)
        try:
            report = log_verify(
                data_dir=settings.TIDELOG_DATA_DIR, topic=options["topic"], repair=options["repair"]
            )
        except TidelogError as exc:
            raise CommandError(str(exc)) from None
        finally:
            streams_log.setLevel(level)
        self.stdout.write(fmt.verify_report(report, options["repair"]))
        if report.damaged:
            raise CommandError(f"{len(report.damaged)} damaged range(s) left")
