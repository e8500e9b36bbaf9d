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

Security (all off by default, as a plain Kafka listener): TLS when ``tls_cert_file`` and
``tls_key_file`` are given; SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) when an
``authenticator`` is. With SASL, a connection may send only ApiVersions and SaslHandshake, then
SaslAuthenticate (or, after a v0 handshake, raw SASL tokens) until it has authenticated, as in
Kafka's SaslServerAuthenticator: any other request closes the connection (during the exchange
it is first answered with ILLEGAL_SASL_STATE); a failed authentication is answered with
SASL_AUTHENTICATION_FAILED, then the connection is closed. Every request of an authenticated
connection is then authorised by the principal's role (``authz``). Frames stay below
`SASL_MAX_RECEIVE_BYTES` until a connection has authenticated (Kafka's
``sasl.server.max.receive.size``). With an ``audit`` sink, admin changes are recorded
(``audit``).

`KafkaListener.start()` runs the server on its own event loop in its own thread (how ``Broker``
embeds it); `serve()` runs it on the caller's loop. That own loop is uvloop's (libuv: less
CPU per request than asyncio's selector loop) when ``ListenerConfig.event_loop`` is "uvloop"
(the default), uvloop is installed and the listener speaks plaintext; else asyncio's. A TLS
listener keeps asyncio's loop: its per-connection ``start_tls`` fails the handshake under
uvloop 0.23 (tests/protocol/test_sasl.py's TLS test).

Thread-safety: `start()`/`stop()` may be called from any thread, once each; everything else
runs on the listener's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import logging
import ssl
import struct
import threading
import time
from collections.abc import Awaitable, Callable

from streams import telemetry
from streams.errors import ProtocolError
from streams.protocol import audit, authz, codec
from streams.protocol.audit import AuditEvent, AuditSink
from streams.protocol.handlers import APIS, SUPPORTED_VERSIONS
from streams.protocol.handlers.common import (
    BrokerContext,
    CloseConnection,
    Deferred,
    ErrorCode,
    RecordCheck,
)
from streams.protocol.handlers.metadata import handle_api_versions
from streams.protocol.notify import AppendNotifier
from streams.protocol.security import (
    MECHANISMS,
    OPEN,
    ROLE_REFRESH_S,
    AuthenticationFailed,
    Authenticator,
    Peer,
    Principal,
    SaslExchange,
    ScopedAuthenticator,
)
from streams.txn import TransactionCoordinator

log = logging.getLogger("streams.protocol")
_API_NAMES = {key: telemetry.api_name(api.handler.__name__) for key, api in APIS.items()}

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_MIN_FRAME = 8  # api key, api version, correlation id
SASL_MAX_RECEIVE_BYTES = 512 * 1024  # Kafka's sasl.server.max.receive.size, before authentication
TLS_HANDSHAKE_TIMEOUT_S = 10.0
AUTH_THREADS = 2
FAILED_AUTHENTICATION_DELAY_S = 0.1  # Kafka's connection.failed.authentication.delay.ms
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36


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
    tls_cert_file: str | None = None  # PEM certificate (chain): the listener speaks TLS
    tls_key_file: str | None = None  # the certificate's private key (PEM)
    authenticator: Authenticator | None = None  # set: SASL is required (see the docstring)
    audit: AuditSink | None = None  # set: admin changes over this port are recorded there
    # Kafka's super.users ("User:admin"): allowed everything, whatever the ACLs say
    super_users: frozenset[str] = frozenset()
    event_loop: str = "uvloop"  # `start()`'s: "uvloop" (if installed, not with TLS) or "asyncio"

    @property
    def security_protocol(self) -> str:
        """Kafka's name for the listener's mode: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        sasl, tls = self.authenticator is not None, self.tls_cert_file is not None
        if sasl:
            return "SASL_SSL" if tls else "SASL_PLAINTEXT"
        return "SSL" if tls else "PLAINTEXT"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context (TLS 1.2 or later), None without a certificate."""
        if self.tls_cert_file is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        return context


class KafkaListener:
    def __init__(
        self,
        store,
        coordinator,
        config: ListenerConfig | None = None,
        *,
        record_check: RecordCheck | None = None,
    ):
        self.store = store
        self.coordinator = coordinator
        self.config = config or ListenerConfig()
        self.record_check = record_check  # produced record sets checked before they are written
        self.transactions: TransactionCoordinator | None = None  # made by _open
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._connections: set[_Connection] = set()
        self._ctx: BrokerContext | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._auth_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.address: tuple[str, int] | None = None
        self._tls: ssl.SSLContext | None = None

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
            cfg = self.config
            factory = _loop_factory(cfg.event_loop, tls=cfg.tls_cert_file is not None)
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(self.serve(ready))
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
        try:
            await self._stopped.wait()
        finally:
            await self._close()

    def stop(self) -> None:
        """Stop accepting and close every connection; waits for it (the store keeps the
        producer state: it is snapshotted with the partitions)."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop finished meanwhile
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    async def _open(self) -> None:
        cfg = self.config
        self.transactions = TransactionCoordinator(
            self.store, self.coordinator, self.store.allocate_producer_id
        ).load()
        self.transactions.start()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            cfg.worker_threads, thread_name_prefix="tidelog-kafka-io"
        )
        # SASL checks (Django's PBKDF2 for PLAIN: about a second of CPU) and role look-ups get
        # threads of their own, so a flood of sign-ins cannot hold up produce, fetch and groups
        self._auth_executor = concurrent.futures.ThreadPoolExecutor(
            AUTH_THREADS, thread_name_prefix="tidelog-kafka-auth"
        )
        notifier = AppendNotifier(self._loop)
        self._tls = cfg.ssl_context()  # the handshake runs per connection (`_connection`)
        self._ctx = BrokerContext(
            store=self.store,
            coordinator=self.coordinator,
            config=cfg,
            transactions=self.transactions,
            notifier=notifier,
            executor=self._executor,
            cluster_id=_cluster_id(self.store.path),
            auth_executor=self._auth_executor,
            record_check=self.record_check,
            acls=self._acls(),
        )
        try:
            self._server = await asyncio.start_server(
                self._connection, cfg.host, cfg.port, limit=1 << 20
            )
        except BaseException:  # e.g. the port is taken: leave nothing running behind
            self.transactions.close()
            self._executor.shutdown(wait=False)
            self._auth_executor.shutdown(wait=False)
            raise
        self.store.add_append_listener(notifier.on_append)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = (host, port)
        self._ctx.host = cfg.advertised_host or host
        self._ctx.port = port
        log.info("Kafka listener on %s:%d (%s)", host, port, cfg.security_protocol)

    def _acls(self):
        """The ACLs (``__acls``) when the listener has principals to apply them to (SASL)."""
        if self.config.authenticator is None:
            return None
        from streams.acl import ACLS_TOPIC, Acls
        from streams.log import StoreKeyedLog

        return Acls(StoreKeyedLog(self.store, ACLS_TOPIC), super_users=self.config.super_users)

    async def _close(self) -> None:
        self._server.close()
        for conn in list(self._connections):
            conn.abort()
        await asyncio.gather(*(c.done for c in self._connections), return_exceptions=True)
        await self._server.wait_closed()
        self.store.remove_append_listener(self._ctx.notifier.on_append)
        self._executor.shutdown(wait=True)
        self._auth_executor.shutdown(wait=True)
        self.transactions.close()
        log.info("Kafka listener on %s:%d closed", *self.address)

    # ================================================================== connections

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        peer = writer.get_extra_info("peername")
        if self._tls is not None and not await _tls_handshake(writer, self._tls, peer):
            return
        conn = _Connection(self._ctx, reader, writer, peer)
        self._connections.add(conn)
        telemetry.current().connection(1)
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass  # the loop is shutting down: this task is the top of its connection, end it
        finally:
            self._connections.discard(conn)
            telemetry.current().connection(-1)


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
        # None until a connection to a SASL listener has authenticated
        self.principal: Principal | None = OPEN if ctx.config.authenticator is None else None
        self.role_checked = 0.0  # loop time the principal's role was last looked up
        self.exchange: SaslExchange | None = None  # the SASL exchange, once a handshake chose it
        self.raw_sasl = False  # after a v0 SaslHandshake: tokens come without Kafka headers
        self.closing = False  # the last response is queued: read no more requests
        self._failure = ""  # why the last SASL step failed, as the client is told
        self._refused_logged: set[int] = set()
        self._denials_audited: set[tuple] = set()

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
            try:
                if self.principal is None and self._failure:
                    await self._linger(FAILED_AUTHENTICATION_DELAY_S)
            finally:
                self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
            self.done.set_result(None)

    async def _linger(self, seconds: float) -> None:
        """Kafka's delayed close after a failed authentication: the failure response has been
        written; the connection closes `seconds` later (or when the client closes first),
        reading and dropping what the client still sends meanwhile. A close with unread input
        would reset the connection, and a client could lose the response, and with it the
        reason it is told ("Invalid username or password"). Nor is the connection half-closed
        first, as Kafka does not: a client that reads the response and the end of the stream
        in one go may drop the response (kafka-python 3.0 does: it reports "socket
        disconnected" instead of the failure, seen under load in CI)."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(seconds):
                while await self.reader.read(65536):
                    pass

    def _cancel_pending(self) -> None:
        while not self.pending.empty():
            item = self.pending.get_nowait()
            if item is not None and isinstance(item[1], asyncio.Future):
                item[1].cancel()

    async def _read_requests(self) -> None:
        while not self.closing:
            await self.slots.acquire()  # back-pressure: released once a response is written
            try:
                prefix = await self.reader.readexactly(4)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise _Closing("connection closed inside a frame size") from None
                return
            size = codec.frame_size(prefix)
            low, high = (0 if self.raw_sasl else _MIN_FRAME), self.ctx.config.max_request_bytes
            if self.principal is None:
                high = min(high, SASL_MAX_RECEIVE_BYTES)
            if not low <= size <= high:
                raise _Closing(f"request size {size} outside [{low}, {high}] bytes")
            try:
                frame = await self.reader.readexactly(size)
            except asyncio.IncompleteReadError:
                raise _Closing(f"connection closed inside a {size}-byte request") from None
            if self.principal is None:
                await self._authenticate(frame)
            else:
                await self._start(frame)

    async def _start(self, frame: bytes) -> None:
        started = time.perf_counter()
        try:
            req = codec.decode_request(frame, SUPPORTED_VERSIONS)
        except codec.UnsupportedRequest as exc:
            await self.pending.put((None, _unsupported_answer(exc)))
            return
        except ProtocolError as exc:
            raise _Closing(str(exc)) from None
        if self.principal.user is not None:
            await self._refresh_role()
        req = req._replace(client_host=self.host, principal=self.principal)
        api = APIS[req.api_key]
        handler = api.handler
        refused = authz.refusal(self.ctx, req, self.principal)
        if (
            refused is None
            and req.api_key in authz.LISTINGS
            and authz.filters_listings(self.ctx, self.principal)
        ):
            handler = functools.partial(self._listing, handler)
        if refused is not None:
            self._log_refusal(req, refused)
            if refused.denied is not None and self.ctx.config.audit is not None:
                await self._audit_denial(req, refused)
            task = asyncio.ensure_future(_answer(refused.answer))
        elif self.ctx.config.audit is not None and audit.is_audited(req):
            task = asyncio.ensure_future(self._audited(handler, req))
        elif not api.pipelined:  # in this task: no task of its own, no turn of the loop
            await self.pending.put((req, await _settled(handler(self.ctx, req)), started))
            return
        else:
            answer = handler(self.ctx, req)
            task = asyncio.ensure_future(answer)
            if isinstance(answer, Deferred):  # its ordered part first (see ``handlers``)
                await asyncio.wait((answer.ordered,))
        if not api.pipelined:
            await asyncio.wait((task,))
        await self.pending.put((req, task, started))

    # ------------------------------------------------------------------ SASL

    async def _authenticate(self, frame: bytes) -> None:
        """One frame of a connection that has not authenticated yet (see the module
        docstring for what Kafka accepts then)."""
        if self.raw_sasl:  # v0: the frame is a bare SASL token, answered by a bare token
            answer = await self._sasl_step(bytes(frame))
            if answer is None:  # v0 has no error response: Kafka closes the connection
                self.closing = True
            else:
                await self.pending.put((None, struct.pack(">i", len(answer)) + answer))
            return
        try:
            req = codec.decode_request(frame, SUPPORTED_VERSIONS)
        except codec.UnsupportedRequest as exc:
            if exc.api_key != codec.API_VERSIONS_KEY:
                raise _Closing(f"{exc}, before SASL authentication") from None
            await self.pending.put((None, _unsupported_answer(exc)))
            return
        except ProtocolError as exc:
            raise _Closing(str(exc)) from None
        req = req._replace(client_host=self.host)
        key = req.api_key
        if self.exchange is None:  # expecting ApiVersions or SaslHandshake
            if key == codec.API_VERSIONS_KEY:
                await self._reply(req, await handle_api_versions(self.ctx, req))
            elif key == SASL_HANDSHAKE_KEY:
                await self._handshake(req)
            else:
                raise _Closing(
                    f"request of API key {key} before SASL authentication (this listener "
                    f"requires SASL {'/'.join(MECHANISMS)}: check the client's "
                    "security.protocol)"
                )
            return
        if key != SASL_AUTHENTICATE_KEY:
            body = codec.error_response_body(key, req.api_version, ErrorCode.ILLEGAL_SASL_STATE)
            if body is not None:
                await self._reply(req, body)
            self.closing = True
            log.warning(
                "closing Kafka connection from %s: request of API key %d during SASL "
                "authentication",
                self.peer,
                key,
            )
            return
        answer = await self._sasl_step(bytes(req.body.auth_bytes))
        fields = {"auth_bytes": answer or b"", "session_lifetime_ms": 0}
        if answer is None:
            code, message = ErrorCode.SASL_AUTHENTICATION_FAILED, self._failure
            self.closing = True
        else:
            code, message = 0, None
        await self._reply(
            req, codec.make_response(req, error_code=code, error_message=message, **fields)
        )

    async def _handshake(self, req: codec.Request) -> None:
        mechanism = req.body.mechanism
        known = mechanism in MECHANISMS
        code = 0 if known else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        await self._reply(
            req, codec.make_response(req, error_code=code, mechanisms=list(MECHANISMS))
        )
        if known:
            peer = Peer(self.host, req.client_id)
            self.exchange = SaslExchange(mechanism, self.ctx.config.authenticator, peer)
            self.raw_sasl = req.api_version == 0
        else:
            self.closing = True
            log.warning(
                "closing Kafka connection from %s: SASL mechanism %r is not enabled (enabled: %s)",
                self.peer,
                mechanism,
                ", ".join(MECHANISMS),
            )

    async def _sasl_step(self, token: bytes) -> bytes | None:
        """The server's answer to one client token; None when authentication failed."""
        exchange = self.exchange
        try:
            answer = await self._auth_call(exchange.step, token)
        except AuthenticationFailed as exc:
            self._failure = str(exc)
            log.warning(
                "SASL %s authentication failed from %s: %s", exchange.mechanism, self.peer, exc
            )
            return None  # the close is delayed (`_linger`), not the answer
        if exchange.done:
            self.principal = await self._auth_call(self._look_up, exchange.user)
            role = self.principal.role
            self.role_checked = asyncio.get_running_loop().time()
            self.raw_sasl = False
            log.info(
                "Kafka connection from %s authenticated as %s with %s (role %s)",
                self.peer,
                exchange.user,
                exchange.mechanism,
                role.name.lower(),
            )
        return answer

    async def _refresh_role(self) -> None:
        """Look the principal's role up again when it was last looked up `ROLE_REFRESH_S` ago,
        so a changed role (or a deactivated user) applies to open connections too."""
        now = asyncio.get_running_loop().time()
        if now - self.role_checked < ROLE_REFRESH_S:
            return
        user = self.principal.user
        found = await self._auth_call(self._look_up, user)
        self.role_checked = now
        if found != self.principal:
            log.info(
                "Kafka user %s on %s now has role %s", user, self.peer, found.role.name.lower()
            )
        self.principal = found

    def _look_up(self, user: str) -> Principal:
        """`user`'s role, and its roles per resource when the authenticator scopes them
        (blocking: on the authentication threads)."""
        authenticator = self.ctx.config.authenticator
        grants = None
        if isinstance(authenticator, ScopedAuthenticator):
            grants = authenticator.grants(user)
        return Principal(user, authenticator.role(user), grants)

    async def _auth_call(self, fn, *args):
        """Run an authenticator call on the listener's authentication threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.ctx.auth_executor, fn, *args)

    async def _reply(self, req: codec.Request, body) -> None:
        await self.pending.put((None, bytes(codec.encode_response(req, body))))

    def _log_refusal(self, req: codec.Request, refused: authz.Refusal) -> None:
        if req.api_key in self._refused_logged:  # once per API and connection
            return
        self._refused_logged.add(req.api_key)
        log.info(
            "refused API key %d to Kafka user %s from %s (%s)",
            req.api_key,
            self.principal.user,
            self.peer,
            refused.reason,
        )

    async def _audit_denial(self, req: codec.Request, refused: authz.Refusal) -> None:
        """An ACL's refusal in the audit log (``acl.denied``), once per connection and
        resource: a client retrying does not flood it."""
        rtype, name, op = refused.denied
        if (rtype, name, op) in self._denials_audited:
            return
        self._denials_audited.add((rtype, name, op))
        event = AuditEvent(
            action="acl.denied",
            target=f"{rtype.name.lower().replace('_', ' ')} {name}",
            before=None,
            after={"operation": op.name, "api": _API_NAMES.get(req.api_key, str(req.api_key))},
            client_id=req.client_id or "",
            address=self.peer,
            user=self.principal.user,
        )
        try:
            await self.ctx.blocking(self.ctx.config.audit.record, event)
        except Exception:  # noqa: BLE001 - the refusal stands; its record is lost, loudly
            log.exception("could not record the audit of a refusal to %s", self.peer)

    async def _listing(self, handler, ctx, req: codec.Request):
        """A Metadata (all topics) or ListGroups answer, without what the ACLs hide."""
        body = await handler(ctx, req)
        return authz.filter_listing(ctx, req, self.principal, body)

    # ------------------------------------------------------------------ audit

    async def _audited(self, handler, req: codec.Request):
        """Run an admin request's handler, then record what it changed (``audit``)."""
        ctx = self.ctx
        try:
            state = await ctx.blocking(audit.capture_before, ctx, req)
        except Exception:  # noqa: BLE001 - the change goes ahead; its record is lost, loudly
            log.exception("cannot audit API key %d from %s", req.api_key, self.peer)
            return await handler(ctx, req)
        body = await handler(ctx, req)
        try:
            changes = await ctx.blocking(audit.changes_after, ctx, req, body, state)
            for action, target, before, after in changes:
                event = AuditEvent(
                    action=action,
                    target=target,
                    before=before,
                    after=after,
                    client_id=req.client_id or "",
                    address=self.peer,
                    user=self.principal.user,
                )
                await ctx.blocking(ctx.config.audit.record, event)
        except Exception:  # noqa: BLE001 - the change is made: answer the client all the same
            log.exception(
                "could not record the audit of API key %d from %s", req.api_key, self.peer
            )
        return body

    async def _respond(self) -> None:
        while True:
            item = await self.pending.get()
            if item is None:
                return
            req, outcome = item[0], item[1]
            data = outcome if req is None else await self._outcome(req, outcome)
            if data is not None:  # None: acks=0, no response
                self.writer.write(data)
                await self.writer.drain()
            if req is not None:  # from decoded to written, as the client waits for it
                telemetry.current().request(_API_NAMES[req.api_key], time.perf_counter() - item[2])
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


async def _tls_handshake(writer: asyncio.StreamWriter, context: ssl.SSLContext, peer) -> bool:
    """Upgrade a new connection to TLS; False (logged, closed) when the handshake fails, e.g.
    a client configured for plaintext."""
    try:
        await writer.start_tls(context, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        return True
    except (TimeoutError, OSError, EOFError) as exc:  # ssl.SSLError is an OSError
        where = f"{peer[0]}:{peer[1]}" if peer else "?"
        reason = getattr(exc, "reason", None) or type(exc).__name__
        log.warning(
            "TLS handshake with %s failed (%s): is the client configured for SSL or SASL_SSL?",
            where,
            reason,
        )
        writer.transport.abort()
        return False


def _loop_factory(name: str, tls: bool) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop constructor for `name` ("uvloop" or "asyncio"); None (asyncio's default
    loop) for "asyncio", for a `tls` listener, or for "uvloop" when it is not installed."""
    if name not in ("uvloop", "asyncio"):
        raise ValueError(f"event_loop must be 'uvloop' or 'asyncio', not {name!r}")
    if name == "uvloop" and not tls:
        try:
            import uvloop
        except ImportError:
            log.warning("uvloop is not installed: the Kafka listener runs on asyncio's loop")
            return None
        return uvloop.new_event_loop
    return None


async def _settled(answer: Awaitable) -> asyncio.Future:
    """`answer` awaited in the calling task, as a done future for ``_outcome`` (which answers
    its exception, or closes the connection for it, as for a task's)."""
    done = asyncio.get_running_loop().create_future()
    try:
        done.set_result(await answer)
    except Exception as exc:  # noqa: BLE001 - handed to _outcome
        done.set_exception(exc)
    return done


async def _answer(build):
    return build()


def _succeeded(task: asyncio.Task) -> bool:
    return task.done() and not task.cancelled() and task.exception() is None


class _Closing(Exception):
    """This connection is closed, with the reason logged."""


def _cluster_id(path: str) -> str:
    """A stable id for the data directory (Kafka's are 22 base64 characters)."""
    return "tidelog-" + hashlib.sha256(path.encode()).hexdigest()[:14]
