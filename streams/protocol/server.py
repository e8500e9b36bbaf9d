"""The Kafka listener: an asyncio TCP server speaking the Kafka wire protocol over a broker's
store and group coordinator.

Per connection, a reader loop takes size-prefixed frames, decodes them (``codec``) and starts
their handlers in order; a writer loop sends the responses in request order. At most
``max_in_flight`` requests may be read and not yet answered: the reader then stops reading the
socket until the writer catches up (back-pressure: TCP flow control pushes back on the client).
Anything malformed — a size below a header or above ``max_request_bytes``, a truncated frame,
an unknown API key or version, undecodable bytes — closes that one connection with a log line;
other connections and stored data are unaffected.

Blocking engine work (fsync, topic creation, coordinator writes) runs on a thread pool, never on
the event loop; coordinator futures are awaited with ``asyncio.wrap_future``.

`KafkaListener.start()` runs the server on its own event loop in its own thread (how ``Broker``
embeds it); `serve()` runs it on the caller's loop.

Thread-safety: `start()`/`stop()` may be called from any thread, once each; everything else
runs on the listener's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import logging
import threading

from streams.errors import ProtocolError
from streams.log.refusals import RefusalLog
from streams.protocol import codec
from streams.protocol.handlers import APIS, SUPPORTED_VERSIONS
from streams.protocol.handlers.common import BrokerContext, CloseConnection
from streams.protocol.notify import AppendNotifier
from streams.protocol.producer_state import ProducerStateManager

log = logging.getLogger("streams.protocol")

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
SNAPSHOT_INTERVAL_S = 30.0
_MIN_FRAME = 8  # api key, api version, correlation id


@dataclasses.dataclass(frozen=True)
class ListenerConfig:
    host: str = "127.0.0.1"
    port: int = 9092  # 0: any free port (see `KafkaListener.address`)
    auto_create_topics: bool = True  # Kafka's auto.create.topics.enable
    default_partitions: int = 1  # Kafka's num.partitions, for auto-created topics
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_in_flight: int = 64  # pending responses per connection before reading pauses
    advertised_host: str | None = None  # what Metadata tells clients (default: host)
    worker_threads: int = 8


class KafkaListener:
    def __init__(self, store, coordinator, config: ListenerConfig | None = None):
        self.store = store
        self.coordinator = coordinator
        self.config = config or ListenerConfig()
        self.producers = ProducerStateManager(store)
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._connections: set[_Connection] = set()
        self._ctx: BrokerContext | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.address: tuple[str, int] | None = None
        self._snapshot_refusals = RefusalLog("producer state snapshot")

    # ================================================================== lifecycle

    def start(self) -> tuple[str, int]:
        """Run the listener on its own loop in a new thread; returns once it accepts
        connections, with the bound (host, port)."""
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run_thread, args=(ready,), name="tidelog-kafka-listener", daemon=True
        )
        self._thread.start()
        return ready.result()

    def _run_thread(self, ready: concurrent.futures.Future) -> None:
        try:
            asyncio.run(self.serve(ready))
        except BaseException as exc:  # noqa: BLE001 - reported to the starter
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.exception("Kafka listener stopped with an error")

    async def serve(self, ready: concurrent.futures.Future | None = None) -> None:
        """Serve until `stop()`; `ready` gets the bound address once connections are accepted."""
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        await self._open()
        if ready is not None:
            ready.set_result(self.address)
        snapshots = asyncio.create_task(self._snapshot_periodically())
        try:
            await self._stopped.wait()
        finally:
            snapshots.cancel()
            await self._close()

    def stop(self) -> None:
        """Stop accepting, close every connection, snapshot producer state; waits for it."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop finished meanwhile
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    async def _open(self) -> None:
        cfg = self.config
        self.producers.load()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            cfg.worker_threads, thread_name_prefix="tidelog-kafka-io"
        )
        notifier = AppendNotifier(self._loop)
        self._ctx = BrokerContext(
            store=self.store,
            coordinator=self.coordinator,
            config=cfg,
            producers=self.producers,
            notifier=notifier,
            executor=self._executor,
            cluster_id=_cluster_id(self.store.path),
        )
        try:
            self._server = await asyncio.start_server(
                self._connection, cfg.host, cfg.port, limit=1 << 20
            )
        except BaseException:  # e.g. the port is taken: leave nothing running behind
            self._executor.shutdown(wait=False)
            raise
        self.store.add_append_listener(notifier.on_append)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = (host, port)
        self._ctx.host = cfg.advertised_host or host
        self._ctx.port = port
        log.info("Kafka listener on %s:%d", host, port)

    async def _close(self) -> None:
        self._server.close()
        for conn in list(self._connections):
            conn.abort()
        await asyncio.gather(*(c.done for c in self._connections), return_exceptions=True)
        await self._server.wait_closed()
        self.store.remove_append_listener(self._ctx.notifier.on_append)
        self._executor.shutdown(wait=True)
        try:
            self.producers.snapshot()
        except Exception:  # noqa: BLE001 - the store may already be closing
            log.exception("could not write the producer state snapshot")
        log.info("Kafka listener on %s:%d closed", *self.address)

    async def _snapshot_periodically(self) -> None:
        while True:
            await asyncio.sleep(SNAPSHOT_INTERVAL_S)
            try:
                await self._ctx.blocking(self.producers.snapshot)
            except OSError as exc:  # a full disk: one line per streak, the next turn retries
                self._snapshot_refusals.refused("write it", exc, "the previous one stays")
            except Exception:  # noqa: BLE001 - try again next time
                log.exception("producer state snapshot failed")
            else:
                self._snapshot_refusals.succeeded()

    # ================================================================== connections

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        peer = writer.get_extra_info("peername")
        conn = _Connection(self._ctx, reader, writer, peer)
        self._connections.add(conn)
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass  # the loop is shutting down: this task is the top of its connection, end it
        finally:
            self._connections.discard(conn)


class _Connection:
    """One client connection: ordered request processing and responses."""

    def __init__(self, ctx: BrokerContext, reader, writer, peer):
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        self.host = peer[0] if peer else ""
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.pending: asyncio.Queue = asyncio.Queue()
        # one slot per request read and not yet answered: with none free, the socket is not read
        self.slots = asyncio.Semaphore(ctx.config.max_in_flight)
        self.done = asyncio.get_running_loop().create_future()
        self._tasks: tuple[asyncio.Task, ...] = ()

    def abort(self) -> None:
        """Stop serving this connection (listener shutdown); `run()` then returns."""
        for task in self._tasks:
            task.cancel()

    async def run(self) -> None:
        reading = asyncio.create_task(self._read_requests())
        responding = asyncio.create_task(self._respond())
        self._tasks = (reading, responding)
        try:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            if _succeeded(reading):
                await self.pending.put(None)  # the client is done: answer what is pending
                await asyncio.wait((responding,))
            for task in self._tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise task.exception()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except _Closing as exc:
            log.warning("closing Kafka connection from %s: %s", self.peer, exc)
        except Exception:  # noqa: BLE001 - a bug must cost one connection, not the listener
            log.exception("closing Kafka connection from %s after an internal error", self.peer)
        finally:
            for task in (reading, responding):
                task.cancel()
            await asyncio.gather(reading, responding, return_exceptions=True)
            self._cancel_pending()
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
            self.done.set_result(None)

    def _cancel_pending(self) -> None:
        while not self.pending.empty():
            item = self.pending.get_nowait()
            if item is not None and isinstance(item[1], asyncio.Future):
                item[1].cancel()

    async def _read_requests(self) -> None:
        max_bytes = self.ctx.config.max_request_bytes
        while True:
            await self.slots.acquire()  # back-pressure: released once a response is written
            try:
                prefix = await self.reader.readexactly(4)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise _Closing("connection closed inside a frame size") from None
                return
            size = codec.frame_size(prefix)
            if not _MIN_FRAME <= size <= max_bytes:
                raise _Closing(f"request size {size} outside [{_MIN_FRAME}, {max_bytes}] bytes")
            try:
                frame = await self.reader.readexactly(size)
            except asyncio.IncompleteReadError:
                raise _Closing(f"connection closed inside a {size}-byte request") from None
            await self._start(frame)

    async def _start(self, frame: bytes) -> None:
        try:
            req = codec.decode_request(frame, SUPPORTED_VERSIONS)
        except codec.UnsupportedRequest as exc:
            await self.pending.put((None, _unsupported_answer(exc)))
            return
        except ProtocolError as exc:
            raise _Closing(str(exc)) from None
        req = req._replace(client_host=self.host)
        api = APIS[req.api_key]
        task = asyncio.ensure_future(api.handler(self.ctx, req))
        if not api.pipelined:
            await asyncio.wait((task,))
        await self.pending.put((req, task))

    async def _respond(self) -> None:
        while True:
            item = await self.pending.get()
            if item is None:
                return
            req, outcome = item
            data = outcome if req is None else await self._outcome(req, outcome)
            if data is not None:  # None: acks=0, no response
                self.writer.write(data)
                await self.writer.drain()
            self.slots.release()

    async def _outcome(self, req: codec.Request, task: asyncio.Future) -> bytes | None:
        try:
            body = await task
        except CloseConnection as exc:
            raise _Closing(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the listener
            log.exception("handler for API %d v%d failed", req.api_key, req.api_version)
            raise _Closing(f"internal error answering API {req.api_key}: {exc}") from None
        if body is None:
            return None
        return codec.encode_response(req, body)


def _unsupported_answer(exc: codec.UnsupportedRequest) -> bytes:
    """The answer to a request this broker does not serve, or _Closing: ApiVersions gets its
    fallback; an API Kafka defines but Tidelog does not serve (never advertised) gets its own
    response shape with UNSUPPORTED_VERSION, so the connection survives; unknown keys, and
    versions of served APIs outside the advertised range, close the connection."""
    key, version, correlation = exc.api_key, exc.api_version, exc.correlation_id
    if key == codec.API_VERSIONS_KEY:
        return codec.api_versions_fallback(correlation, SUPPORTED_VERSIONS)
    if key in SUPPORTED_VERSIONS or not codec.is_kafka_api(key):
        raise _Closing(str(exc))
    answer = codec.unsupported_api_response(key, version, correlation)
    if answer is None:
        raise _Closing(f"{exc}, and no response shape is known for it")
    log.debug("answered unserved API key %d v%d with UNSUPPORTED_VERSION", key, version)
    return answer


def _succeeded(task: asyncio.Task) -> bool:
    return task.done() and not task.cancelled() and task.exception() is None


class _Closing(Exception):
    """This connection is closed, with the reason logged."""


def _cluster_id(path: str) -> str:
    """A stable id for the data directory (Kafka's are 22 base64 characters)."""
    return "tidelog-" + hashlib.sha256(path.encode()).hexdigest()[:14]
