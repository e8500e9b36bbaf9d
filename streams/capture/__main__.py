"""``python -m streams.capture postgres --dsn DSN --tables T1,T2 --bootstrap HOST:PORT``.

Streams every insert, update and delete of the tables (logical decoding with ``pgoutput``)
into one compacted topic per table, ``<server>.<schema>.<table>``, as Debezium change events,
until SIGTERM or SIGINT; then it waits for the log to acknowledge what it sent, confirms that
position to PostgreSQL and exits 0. A setup problem (a table without a primary key, a missing
table, a topic that is not compacted) is printed and exits 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from streams.capture.pgoutput import format_lsn
from streams.capture.postgres import (
    DEFAULT_COMPRESSION,
    DEFAULT_PUBLICATION,
    DEFAULT_SERVER,
    DEFAULT_SLOT,
    CaptureError,
    PostgresCapture,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m streams.capture", description=__doc__)
    sub = p.add_subparsers(dest="source", required=True)
    pg = sub.add_parser("postgres", help="capture from PostgreSQL (logical decoding, pgoutput)")
    pg.add_argument("--dsn", required=True, help="libpq connection string or postgresql:// URL")
    pg.add_argument(
        "--tables", required=True, help="comma-separated TABLE or SCHEMA.TABLE (default public)"
    )
    pg.add_argument("--bootstrap", required=True, help="a Kafka-protocol broker, HOST:PORT")
    pg.add_argument(
        "--command-config",
        metavar="FILE",
        help="the cluster's client properties (librdkafka's names: security.protocol, "
        "sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...; a value may be "
        "${env:NAME} or ${file:/path}), for every client capture makes",
    )
    pg.add_argument("--slot", default=DEFAULT_SLOT, help="logical replication slot name")
    pg.add_argument("--publication", default=DEFAULT_PUBLICATION, help="publication name")
    pg.add_argument(
        "--server", default=DEFAULT_SERVER, help="topic prefix: topics are SERVER.SCHEMA.TABLE"
    )
    pg.add_argument(
        "--snapshot",
        action="store_true",
        help="also read the tables' current rows (DBLog chunks while the stream runs, op r)",
    )
    pg.add_argument("--chunk-rows", type=int, default=1024, help="rows per snapshot chunk")
    pg.add_argument(
        "--compression",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        default=DEFAULT_COMPRESSION,
        help=f"the producer's compression.type (default {DEFAULT_COMPRESSION})",
    )
    pg.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    tables = [t for t in (x.strip() for x in args.tables.split(",")) if t]
    client_config = None
    if args.command_config:
        from streams.cluster.connection import load_client_properties
        from streams.errors import InvalidConfig

        try:
            client_config = load_client_properties(args.command_config, what="--command-config")
        except InvalidConfig as exc:
            print(f"capture: {exc}", file=sys.stderr)
            return 2
    capture = PostgresCapture(
        dsn=args.dsn,
        tables=tables,
        bootstrap=args.bootstrap,
        slot=args.slot,
        publication=args.publication,
        server=args.server,
        snapshot_tables=tables if args.snapshot else (),
        chunk_rows=args.chunk_rows,
        producer_config={"compression.type": args.compression},
        client_config=client_config,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: capture.stop())
    import psycopg2

    try:
        stats = capture.run()
    except CaptureError as exc:
        print(f"capture: {exc}", file=sys.stderr)
        return 2
    except psycopg2.Error as exc:
        print(f"capture: PostgreSQL: {str(exc).strip()}", file=sys.stderr)
        return 2
    print(
        f"capture stopped: {stats.transactions} transactions, {stats.records} records written, "
        f"{stats.skipped_records} replayed records already in the log skipped, "
        f"confirmed LSN {format_lsn(stats.confirmed_lsn)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
