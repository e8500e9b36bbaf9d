"""``python -m streams.protocol --data-dir DIR [--host H] [--port P] ...``: a Tidelog broker
(no demo traffic) with its Kafka listener, until SIGTERM or SIGINT, then a clean close.

Prints ``listening on HOST:PORT`` on stdout once connections are accepted (with ``--port 0``
the line shows the port picked).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from streams.broker.runtime import Broker
from streams.gcsettings import settle_gc
from streams.log import KAFKA_FLUSH_DEFAULTS
from streams.protocol.server import DEFAULT_MAX_REQUEST_BYTES, ListenerConfig


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m streams.protocol", description=__doc__)
    p.add_argument("--data-dir", required=True, help="the broker's data directory")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9092, help="0 picks a free port")
    p.add_argument(
        "--no-auto-create",
        action="store_true",
        help="do not create unknown topics on produce or metadata requests",
    )
    p.add_argument("--default-partitions", type=int, default=1, help="for auto-created topics")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    p.add_argument(
        "--initial-rebalance-delay-ms",
        type=int,
        default=3000,
        help="Kafka's group.initial.rebalance.delay.ms (how long a new group waits for members)",
    )
    p.add_argument(
        "--flush",
        choices=("fsync", "kafka"),
        default="fsync",
        help="fsync (the default): a write is acknowledged once it is on disk (fdatasync, "
        "shared by concurrent writers); kafka: Kafka's default flush policy, acknowledged once "
        "it is in the page cache (survives a crash of the broker process, not a power loss "
        "of the machine), fdatasync at least every second (flush.messages and flush.ms of "
        "every topic that does not set them itself)",
    )
    p.add_argument(
        "--event-loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the listener's event loop: uvloop (the default; asyncio's if uvloop is not "
        "installed) or asyncio's own",
    )
    p.add_argument(
        "--sasl-users",
        metavar="FILE",
        help="require SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) of the users in FILE, one "
        "user:password[:operator|viewer] per line (streams.protocol.users_file)",
    )
    p.add_argument("--tls-cert", metavar="PEM", help="speak TLS with this certificate (chain)")
    p.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    p.add_argument(
        "--super-users",
        default="",
        metavar="PRINCIPALS",
        help="Kafka's super.users: principals allowed everything whatever the ACLs say, "
        "semicolon-separated (User:admin;User:ops); with --sasl-users",
    )
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    from streams.acl.model import InvalidAcl, parse_super_users

    try:
        args.super_users = frozenset(parse_super_users(args.super_users))
    except InvalidAcl as exc:
        p.error(f"--super-users: {exc}")
    if args.super_users and not args.sasl_users:
        p.error("--super-users needs --sasl-users (ACLs apply to SASL principals)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    authenticator = None
    if args.sasl_users:
        from streams.errors import InvalidConfig
        from streams.protocol.users_file import FileUsers

        try:
            authenticator = FileUsers(args.sasl_users)
        except InvalidConfig as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    config = ListenerConfig(
        host=args.host,
        authenticator=authenticator,
        tls_cert_file=args.tls_cert,
        tls_key_file=args.tls_key,
        super_users=args.super_users,
        port=args.port,
        auto_create_topics=not args.no_auto_create,
        default_partitions=args.default_partitions,
        max_request_bytes=args.max_request_bytes,
        event_loop=args.event_loop,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    broker = Broker.open(
        args.data_dir,
        demo=False,
        kafka_listener=config,
        coordinator_options={"initial_rebalance_delay_ms": args.initial_rebalance_delay_ms},
        topic_defaults=KAFKA_FLUSH_DEFAULTS if args.flush == "kafka" else None,
    )
    settle_gc()  # the broker open: as every process that moves records (streams.gcsettings)
    try:
        host, port = broker.kafka_address
        print(f"listening on {host}:{port}", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
