"""`RegistryServer`: the schema registry's REST API (`streams.schemas.rest`) over HTTP/1.1.

Served by the standard library's ``ThreadingHTTPServer`` (one thread per connection,
keep-alive), which is enough for a registry: clients cache every schema they fetch by id, so the
traffic is a few requests per client and schema.

Who may do what is asked of a `RegistryAuthenticator`, the seam the console implements over
its users, roles and API tokens (``brokerui.kafkaport.adapters.RegistryConsoleAuthenticator``):
HTTP Basic (``basic.auth.user.info`` of Confluent's clients) and bearer tokens
(``bearer.auth.token``; ``Authorization: Token ...`` too, as the console's API takes it).
Viewers read, operators also write. Without an authenticator the registry is open, as
Confluent's is by default. Each change goes to a `RegistryAuditSink` after it is made.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from streams.protocol.security import Role
from streams.schemas import errors as E
from streams.schemas import rest
from streams.schemas.registry import SchemaRegistry

log = logging.getLogger(__name__)

MAX_BODY = 16 << 20  # as the console's API: a schema is rarely more than a few hundred KB


class RegistryAuthenticator(Protocol):
    """Blocking (may hash a password or read a database); called on the server's threads."""

    def check_password(self, user: str, password: str, address: str) -> bool: ...

    def user_for_token(self, token: str) -> str | None:
        """The user an API token belongs to; None for an unknown token."""
        ...

    def role(self, user: str) -> Role: ...


@dataclasses.dataclass(frozen=True)
class RegistryAuditEvent:
    action: str  # e.g. schema.register
    target: str  # "subject NAME" ("... version N"), or "registry" for the global config
    before: Any
    after: Any
    user: str | None  # None on a registry without authentication
    address: str  # the client's host:port
    user_agent: str


class RegistryAuditSink(Protocol):
    def record(self, event: RegistryAuditEvent) -> None: ...


@dataclasses.dataclass(frozen=True)
class RegistryConfig:
    host: str = "127.0.0.1"
    port: int = 8081  # Confluent's default; 0 picks a free port
    authenticator: RegistryAuthenticator | None = None
    audit: RegistryAuditSink | None = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Confluent's clients expect
    # the headers and the body go out as two writes: with Nagle's algorithm the second waits
    # for the client's delayed ACK (40 ms a request on Linux, seen in bench_schemas)
    disable_nagle_algorithm = True
    server_version = "tidelog-schema-registry"
    server: _Server

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the stdlib's name)
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_DELETE = do_GET

    def _serve(self) -> None:
        try:
            request = self._request()
            response = self.server.answer(request, self._who())
        except E.RegistryError as exc:
            response = rest.error_response(exc)
        except Exception:  # a bug: logged, and a JSON 500, never a dropped connection
            log.exception("schema registry: %s %s failed", self.command, self.path)
            response = rest.RestResponse(500, {"error_code": 50001, "message": "Internal error"})
        self._send(response)

    def _request(self) -> rest.RestRequest:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            raise E.BadRequest(f"the request body is over {MAX_BODY} bytes")
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        return rest.RestRequest(
            self.command,
            parts.path.rstrip("/") if parts.path != "/" else "",
            dict(parse_qsl(parts.query, keep_blank_values=True)),
            body,
            self.headers.get("Content-Type", ""),
        )

    def _who(self) -> tuple[str | None, str, str]:
        """(Authorization header, client address, user agent)."""
        host, port = self.client_address[:2]
        return (
            self.headers.get("Authorization"),
            f"{host}:{port}",
            self.headers.get("User-Agent", ""),
        )

    def _send(self, response: rest.RestResponse) -> None:
        body = response.encoded()
        self.send_response(response.status)
        self.send_header("Content-Type", rest.CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        if response.status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="tidelog-schema-registry"')
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, config: RegistryConfig, registry: SchemaRegistry):
        super().__init__((config.host, config.port), _Handler)
        self.config, self.registry = config, registry

    def answer(self, request: rest.RestRequest, who: tuple[str | None, str, str]):
        authorization, address, agent = who
        route, _ = rest.match(request.method, request.path)
        user = self._authorize(authorization, address, route.writes)
        response = rest.handle(self.registry, request)
        if response.audit is not None and self.config.audit is not None:
            action, target, before, after = response.audit
            event = RegistryAuditEvent(action, target, before, after, user, address, agent)
            try:
                self.config.audit.record(event)
            except Exception:  # the change is made: the client still gets its answer
                log.exception("schema registry: could not audit %s", action)
        return response

    def _authorize(self, authorization: str | None, address: str, writes: bool) -> str | None:
        auth = self.config.authenticator
        if auth is None:
            return None
        user = _user(auth, authorization, address)
        role = auth.role(user)
        needed = Role.OPERATOR if writes else Role.VIEWER
        if role < needed:
            what = "Write" if writes else "Read"
            raise E.Forbidden(f"User {user} is denied operation {what} on the schema registry")
        return user


def _user(auth: RegistryAuthenticator, authorization: str | None, address: str) -> str:
    scheme, _, credentials = (authorization or "").partition(" ")
    scheme = scheme.lower()
    if scheme == "basic":
        try:
            user, sep, password = base64.b64decode(credentials).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, sep, password = "", "", ""
        if sep and auth.check_password(user, password, address):
            return user
    elif scheme in ("bearer", "token"):
        found = auth.user_for_token(credentials.strip())
        if found is not None:
            return found
    raise E.Unauthorized("Unauthorized")


class RegistryPortUnavailable(OSError):
    """The registry's port cannot be listened on (taken, or not allowed)."""


class RegistryServer:
    """The registry served on ``config.host:config.port`` from a thread of its own."""

    def __init__(self, registry: SchemaRegistry, config: RegistryConfig | None = None):
        self.registry = registry
        self.config = config or RegistryConfig()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> RegistryServer:
        try:
            self._server = _Server(self.config, self.registry)
        except OSError as exc:
            raise RegistryPortUnavailable(exc.errno, exc.strerror) from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="schema-registry",
            daemon=True,
        )
        self._thread.start()
        log.info("schema registry on %s", self.url)
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None, "not started"
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
