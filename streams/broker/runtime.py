"""`Broker`: the runtime that owns one data directory for the life of a process.

It opens the log store (which takes the directory's exclusive lock), starts the group
coordinator over it (committed offsets live in the store's ``__consumer_offsets``), optionally
the Kafka wire-protocol listener (``streams.protocol``), runs the background work (optional demo
traffic, with a demo consumer group) and, on `close()`, stops the listener and that work before
the coordinator and then the store, so the store's last flush and
recovery points see no appender still running.

Thread-safety: `open` and `close` are meant to be called by one owner; `store` may be used from
any thread (the store does its own locking). `close()` is idempotent.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from streams.broker.demo import DemoTraffic

if TYPE_CHECKING:
    from streams.protocol import ListenerConfig
    from streams.schemas import RegistryConfig

log = logging.getLogger(__name__)
MAPPINGS_FILE = "schema-mappings.json"  # topics mapped to a schema without the wire format


class Broker:
    def __init__(
        self,
        data_dir: Path,
        store,
        coordinator,
        demo: DemoTraffic | None = None,
        metrics=None,
        panels=None,
        health=None,
        alerts=None,
        jobs=None,
    ):
        self.data_dir = data_dir
        self._store = store
        self._coordinator = coordinator
        self._demo = demo
        self._metrics = metrics
        self._panels = panels
        self._health = health
        self._alerts = alerts
        self._jobs = jobs
        self._listener = None  # the Kafka listener, set by open()
        self._schemas = None  # the SchemaRegistry, made on first use (``schemas``)
        self._reading = None  # its TopicReading with the topics' schema mappings (``reading``)
        self._registry_server = None  # its REST API, once started
        self._capture = None  # CaptureSources, made on first use (``capture``)
        self._closed = False
        self._close_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        data_dir: str | Path,
        *,
        demo: bool = False,
        metrics: bool = True,
        kafka_listener: ListenerConfig | None = None,
        coordinator_options: dict | None = None,
        health: bool = True,
        topic_defaults: dict[str, str] | None = None,
    ) -> Broker:
        """Open the store in `data_dir` (created if missing) and start the background work:
        the metrics hub and the panel jobs (unless `metrics` is False) and demo traffic.

        With `kafka_listener`, a Kafka wire-protocol listener runs in its own thread (see
        `kafka_address`); `coordinator_options` go to `GroupCoordinator` (e.g. a short
        ``initial_rebalance_delay_ms``). With `health` (the default) a `GroupHealthMonitor`
        keeps every group's window of commits and judges it (`health`), and the alert rules
        are evaluated after each of its samples (`alerts`). Raises
        `DataDirLocked` when another process holds the directory. `topic_defaults`: topic
        configs for the keys a topic does not set (see ``LogStore.open``), e.g. Kafka's flush
        policy.
        """
        from streams.alerts import Alerts
        from streams.broker.metrics import MetricsHub
        from streams.groups import GroupCoordinator
        from streams.groups.health import GroupHealthMonitor
        from streams.jobs.embedded import EmbeddedJobs
        from streams.log import LogStore
        from streams.processing.panels import PanelJobs
        from streams.schemas import SchemaRegistry, StoreSchemaLog
        from streams.schemas.mapping import MappingBook, TopicReading, use_mappings
        from streams.schemas.serdes import use_registry

        data_dir = Path(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        store = LogStore.open(data_dir, topic_defaults=topic_defaults)
        coordinator = hub = panels = monitor = alerts = jobs = None
        try:
            schemas = SchemaRegistry(StoreSchemaLog(store))  # rebuilt from _schemas now
            use_registry(schemas)  # the registry of the jobs run in this process
            reading = TopicReading(schemas.decoder, MappingBook(data_dir / MAPPINGS_FILE))
            use_mappings(reading.book)  # topics mapped to a schema without the wire format
            coordinator = GroupCoordinator(store, **(coordinator_options or {})).start()
            if health:
                monitor = GroupHealthMonitor(store, coordinator)
                alerts = Alerts(store, monitor).start()
                monitor.start()
            if metrics:
                hub = MetricsHub(store, coordinator).start()
                panels = PanelJobs(store, reading=reading).start()
            traffic = DemoTraffic(store, coordinator=coordinator, schemas=schemas) if demo else None
            if traffic is not None:
                traffic.start()
            jobs = EmbeddedJobs(store, coordinator)
            if demo:
                from streams.broker.demo_jobs import start_demo_jobs

                start_demo_jobs(jobs, store)
        except BaseException:
            for part in (jobs, panels, hub, monitor, alerts, coordinator):
                if part is not None:
                    part.close()
            store.close()
            raise
        broker = cls(data_dir, store, coordinator, traffic, hub, panels, monitor, alerts, jobs)
        broker._schemas = schemas
        broker._reading = reading
        if kafka_listener is not None:
            broker.start_kafka_listener(kafka_listener)
        log.info("broker started on %s (demo traffic %s)", data_dir, "on" if demo else "off")
        return broker

    def start_kafka_listener(self, config: ListenerConfig) -> None:
        """Start the Kafka wire-protocol listener (once; `open` does it when given
        ``kafka_listener``). A listener that cannot start closes the broker and raises."""
        from streams.protocol import KafkaListener

        if self._listener is not None:
            raise RuntimeError("the Kafka listener is running already")

        from streams.schemas.validation import SchemaValidation

        validation = SchemaValidation(self._store, self.schemas)  # confluent.*.schema.validation
        listener = KafkaListener(self._store, self._coordinator, config, record_check=validation)
        try:
            listener.start()
        except BaseException:
            self.close()
            raise
        self._listener = listener

    def start_schema_registry(self, config: RegistryConfig) -> None:
        """Serve the schema registry's REST API (Confluent's) on ``config.port`` (once). A
        server that cannot start closes the broker and raises, as the Kafka listener does."""
        from streams.schemas import RegistryServer

        if self._registry_server is not None:
            raise RuntimeError("the schema registry is served already")
        try:
            self._registry_server = RegistryServer(self.schemas, config).start()
        except BaseException:
            self.close()
            raise

    @property
    def reading(self):
        """How the console and panels read each topic's keys and values: the topic's schema
        mapping (``streams.schemas.mapping``, kept in <data dir>/schema-mappings.json) or the
        registry's wire format."""
        with self._close_lock:
            reading = self._reading
        if reading is None:
            from streams.schemas.mapping import MappingBook, TopicReading

            reading = TopicReading(
                self.schemas.decoder, MappingBook(Path(self.data_dir) / MAPPINGS_FILE)
            )
            with self._close_lock:
                if self._reading is None:
                    self._reading = reading
                reading = self._reading
        return reading

    @property
    def schemas(self):
        """The `SchemaRegistry` over this broker's ``_schemas`` topic (read at first use)."""
        with self._close_lock:
            if self._schemas is None:
                from streams.schemas import SchemaRegistry, StoreSchemaLog

                self._schemas = SchemaRegistry(StoreSchemaLog(self._store))
            return self._schemas

    @property
    def registry_address(self) -> tuple[str, int] | None:
        """(host, port) the schema registry's REST API is served on; None when it is not."""
        server = self._registry_server
        return server.address if server is not None else None

    @property
    def store(self):
        """The `LogStore` this broker owns."""
        return self._store

    @property
    def coordinator(self):
        """The `GroupCoordinator` shared by every client of this broker."""
        return self._coordinator

    @property
    def transactions(self):
        """The Kafka listener's `TransactionCoordinator`; None without a listener (the
        coordinator lives with the listener, which owns the producer ids)."""
        return self._listener.transactions if self._listener is not None else None

    def transactional_producer(self, transactional_id: str, **options):
        """An embedded ``streams.client.Producer`` with transactions, sharing the Kafka
        listener's transaction coordinator (so it fences, and is fenced by, Kafka clients with
        the same transactional id). Needs the listener running."""
        from streams.client import Producer

        if self._listener is None:
            raise RuntimeError("transactions need the Kafka listener (start_kafka_listener)")
        return Producer(
            self._store,
            transactional_id=transactional_id,
            transactions=self._listener.transactions,
            **options,
        )

    @property
    def metrics(self):
        """The `MetricsHub` (None when the broker was opened with ``metrics=False``)."""
        return self._metrics

    @property
    def jobs(self):
        """The `EmbeddedJobs` run in this process (the demo's stream jobs)."""
        return self._jobs

    @property
    def capture(self):
        """The `CaptureSources` (change data capture from PostgreSQL) run in this process;
        they write through the Kafka listener (without one, a start says so)."""
        with self._close_lock:
            if self._capture is None:
                from streams.capture.sources import CaptureSources

                def bootstrap() -> str | None:
                    address = self.kafka_address
                    return f"{address[0]}:{address[1]}" if address else None

                self._capture = CaptureSources(bootstrap)
            return self._capture

    @property
    def panels(self):
        """The `PanelJobs` running user-defined metric panels (None without metrics)."""
        return self._panels

    @property
    def health(self):
        """The `GroupHealthMonitor` judging consumer groups (None when opened without)."""
        return self._health

    @property
    def alerts(self):
        """The broker's `Alerts`: rules, engine, webhook deliveries (None without health)."""
        return self._alerts

    @property
    def kafka_address(self) -> tuple[str, int] | None:
        """(host, port) the Kafka listener accepts connections on; None without one."""
        return self._listener.address if self._listener is not None else None

    @property
    def kafka_security_protocol(self) -> str | None:
        """The Kafka listener's mode (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); None without."""
        return self._listener.config.security_protocol if self._listener is not None else None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._registry_server is not None:
            self._registry_server.stop()
        if self._capture is not None:  # before the listener: a capture flushes through it
            self._capture.close()
        if self._listener is not None:  # then: no client request may reach a closing engine
            self._listener.stop()
        if self._jobs is not None:  # before the demo: a job's last commit needs the store
            self._jobs.close()
        if self._demo is not None:
            self._demo.stop()
        for part in (self._panels, self._metrics, self._health, self._alerts):
            if part is not None:
                part.close()
        self._coordinator.close()
        self._store.close()
        if self._schemas is not None:
            from streams.schemas.serdes import release_registry

            release_registry(self._schemas)
        if self._reading is not None:
            from streams.schemas.mapping import process_mappings, use_mappings

            if process_mappings() is self._reading.book:
                use_mappings(None)
        log.info("broker on %s closed", self.data_dir)

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
