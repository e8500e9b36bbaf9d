"""``python -m streams.jobs run MODULE:JOB --bootstrap HOST:PORT`` runs one worker of a job.

Start it N times (on one machine or several): the workers share the job's input partitions
through its consumer group (group id = the job's name), and tasks move with their state
(restored from the changelogs) when a worker joins, leaves or dies. It speaks only the Kafka
protocol (``streams.jobs.kafka.KafkaLog``), so it runs unchanged against Tidelog's listener
and any Kafka cluster.

- ``MODULE:JOB``: an importable module and the name in it of a ``Job``, or of a function
  without arguments that returns one (e.g. ``shop.jobs:revenue``);
- ``--processing-guarantee``: ``at-least-once`` (the default, as Quix) or ``exactly-once``
  (see ``streams.jobs.runner`` for what each promises);
- ``--checkpoint-interval-ms``: how often outputs, changelogs and offsets are committed
  (default 5000, as Quix);
- ``--command-config FILE``: the cluster's client properties (SASL, TLS; librdkafka's names,
  secrets as ``${env:NAME}``/``${file:/path}``: ``streams.cluster.connection``);
- ``-X key=value``: any librdkafka setting, for every client (over the file's; timeouts ...);
- ``--query-port P``: serve the job's views (interactive queries) on P and advertise it in the
  group member's client id, so queries of this worker's partitions are routed here
  (``streams.jobs.viewserver``).

For the crash tests, ``TIDELOG_JOBS_CRASH_IN_CHECKPOINT=N`` makes the worker SIGKILL itself in
the middle of its first checkpoint that writes at least N records (``KafkaLog(
crash_in_checkpoint=N)``).

SIGTERM or SIGINT stops the worker cleanly: it checkpoints, closes its tasks and leaves the
group, so the others take its tasks over at once. Exit status 0 after a clean stop, 2 for bad
arguments, 1 when the job failed (the error names the record's topic, partition and offset),
3 when a transactional call blocked inside librdkafka long past its timeout (seen after repeated
broker restarts; ``streams.jobs.kafka.KafkaLog._watchdog``): run workers under a supervisor that
restarts them — a crash loses nothing.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import socket
import sys
import threading

from streams.errors import TidelogError
from streams.jobs.job import Job


def load_job(spec: str) -> Job:
    """``module:name`` → the ``Job`` it names (or that the named function returns)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r}: expected MODULE:JOB, e.g. shop.jobs:revenue")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{spec!r}: cannot import {module_name}: {exc}") from exc
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{spec!r}: {module_name} has no {attr!r}") from None
    if not isinstance(obj, Job) and callable(obj):
        obj = obj()
    if not isinstance(obj, Job):
        raise ValueError(f"{spec!r} is a {type(obj).__name__}, not a streams.jobs Job")
    return obj


def _settings(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"-X {pair!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def _command_config(path: str) -> dict[str, str]:
    from streams.cluster.connection import load_client_properties
    from streams.errors import InvalidConfig

    try:
        return load_client_properties(path, what="--command-config")
    except InvalidConfig as exc:
        raise ValueError(str(exc)) from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m streams.jobs", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one worker of a job")
    run.add_argument("job", metavar="MODULE:JOB")
    run.add_argument("--bootstrap", required=True, help="HOST:PORT[,HOST:PORT...]")
    run.add_argument(
        "--processing-guarantee",
        choices=("at-least-once", "exactly-once"),
        default="at-least-once",
    )
    run.add_argument("--checkpoint-interval-ms", type=int, default=5000)
    run.add_argument("--state-backend", choices=("memory", "rocksdb"), default="memory")
    run.add_argument("--state-dir", help="where the rocksdb backend keeps its files")
    run.add_argument("--max-records", type=int, default=1000, help="per partition per round")
    run.add_argument(
        "-X", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="a librdkafka setting for every client (repeatable; over --command-config's)",
    )  # fmt: skip
    run.add_argument(
        "--command-config",
        metavar="FILE",
        help="the cluster's client properties (librdkafka's names: security.protocol, "
        "sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...; a value may be "
        "${env:NAME} or ${file:/path}), for every client the worker makes",
    )
    run.add_argument(
        "--query-port",
        type=int,
        help="serve the job's views (interactive queries) on this port (0: any free one) and "
        "advertise it in the group, so the console routes queries of this worker's partitions "
        "here (streams.jobs.viewserver)",
    )
    run.add_argument("--query-host", default="127.0.0.1", help="the query endpoint's address")
    run.add_argument(
        "--schema-registry",
        help="the schema registry's URL, for the job's Avro/Protobuf/JsonSchema serdes "
        "(else TIDELOG_SCHEMA_REGISTRY; HTTP Basic from TIDELOG_SCHEMA_REGISTRY_AUTH=user:pass)",
    )
    run.add_argument("--log-level", default="INFO")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.schema_registry:  # before the job is built: its serdes find the registry here
        os.environ["TIDELOG_SCHEMA_REGISTRY"] = args.schema_registry
    try:
        job = load_job(args.job)
        settings = _settings(args.settings)
        if args.command_config:
            settings = {**_command_config(args.command_config), **settings}
        if args.checkpoint_interval_ms < 0:
            raise ValueError("--checkpoint-interval-ms must be >= 0")
        crash = os.environ.get("TIDELOG_JOBS_CRASH_IN_CHECKPOINT")
        crash_at = int(crash) if crash else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from streams.jobs.kafka import KafkaLog
    from streams.jobs.runner import Runner
    from streams.jobs.worker import settle_gc

    exactly_once = args.processing_guarantee == "exactly-once"
    server = views = None
    if args.query_port is not None:  # bound now: its address goes in the member's client id
        from streams.jobs.viewserver import ViewServer, member_client_id

        server = ViewServer(None, args.query_host, args.query_port)
        settings = {**settings, "client.id": member_client_id(job.name, server.address)}
    kafka_log = KafkaLog(
        args.bootstrap,
        exactly_once=exactly_once,
        client_config=settings,
        crash_in_checkpoint=crash_at,
    )
    if server is not None:
        from streams.jobs.views import ViewRegistry

        views = server.registry = ViewRegistry(kafka_log)
        server.start()
    runner = Runner(
        job,
        log=kafka_log,
        state_backend=args.state_backend,
        state_dir=args.state_dir,
        max_records=args.max_records,
        checkpoint_interval_ms=args.checkpoint_interval_ms,
        views=views,
        query_endpoint=server.address if server else None,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log = logging.getLogger("streams.jobs")
    log.info(
        "job %s: worker %s pid %d on %s, %s, checkpoint every %d ms",
        job.name, socket.gethostname(), os.getpid(), args.bootstrap,
        args.processing_guarantee, args.checkpoint_interval_ms,
    )  # fmt: skip
    settle_gc()  # streams.jobs.worker: the job loaded, the clients made
    try:
        runner.start()
        runner.run(stop.is_set)
    except TidelogError as exc:
        log.error("job %s failed: %s", job.name, exc)
        return 1
    finally:
        try:
            runner.close()
        except Exception:  # noqa: BLE001 - already failing or stopping; say so, exit anyway
            log.exception("job %s: closing failed", job.name)
        if server is not None:
            server.close()
    log.info("job %s: stopped", job.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
