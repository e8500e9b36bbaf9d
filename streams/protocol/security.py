"""Authentication on the Kafka port: SASL/PLAIN and SASL/SCRAM-SHA-256/512, and who a connection
is once authenticated (a `Principal` with a `Role`).

The listener knows no users. It asks an `Authenticator` (``ListenerConfig.authenticator``), the
seam the web console implements over its own users and roles
(``brokerui.kafkaport.adapters.ConsoleAuthenticator``):

- PLAIN: ``check_plain(user, password)``, checked by the implementation however it stores
  passwords (the console: Django's password hasher);
- SCRAM: ``scram_credential(user, mechanism)``, the salted-password keys of RFC 5802 (salt,
  StoredKey, ServerKey, iterations) that `scram_credential` derives from a password when it is
  set; the listener never sees a password. The server side of the exchange is ``scramp``'s.
  The password is used as its UTF-8 bytes, as Kafka's own ScramFormatter does (no SASLprep), so
  every Kafka client computes the same keys;
- both take the `Peer` signing in (address, client id), so the implementation can throttle
  guesses: it refuses a locked-out user or address by raising `AuthenticationFailed`, and is
  told each SCRAM proof's outcome with ``scram_result`` (PLAIN's it knows itself);
- ``role(user)``: what the user may do (`Role`), asked at authentication and again every
  `ROLE_REFRESH_S` seconds on a long-lived connection.

`SaslExchange` runs one authentication; it is blocking (the authenticator may hash passwords or
read a database) and the listener runs it on its thread pool.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import hashlib
import hmac
import os
from typing import Protocol, runtime_checkable

import scramp

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
SCRAM_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
SCRAM_ITERATIONS = 8192  # Kafka accepts 4096 to 16384
ROLE_REFRESH_S = 30.0  # a connection's role is looked up again after this long
FAILED = "Authentication failed: Invalid username or password"  # Kafka's wording


class Role(enum.IntEnum):
    """What a principal may do. Higher roles include the lower ones."""

    NONE = 0  # authenticated, but neither viewer nor operator: refused everything
    VIEWER = 1  # read topics, their configs and groups; join groups and commit as a member
    OPERATOR = 2  # also produce, change topics and configs, delete records and groups


class Grants(Protocol):
    """A principal's roles per resource, where they differ by scope (the console's role
    bindings: operator of the topics ``team-a.*``, viewer elsewhere). `kind` is "topic" or
    "group"; what is about the whole cluster (brokers, transactional ids) takes the role
    of the `Principal` itself."""

    def role_on(self, kind: str, name: str) -> Role: ...

    def highest(self) -> Role:
        """The best role the principal has anywhere (what a listing needs before it is
        filtered; Kafka's IDEMPOTENT_WRITE implied by WRITE on any topic, KIP-679)."""
        ...


@dataclasses.dataclass(frozen=True)
class Principal:
    user: str | None  # the SASL user; None on a listener without authentication
    role: Role  # on the cluster as a whole
    grants: Grants | None = None  # per topic and group, when they differ from `role`


OPEN = Principal(None, Role.OPERATOR)  # a listener without SASL: every request, as Kafka's


@dataclasses.dataclass(frozen=True)
class ScramCredential:
    """RFC 5802's server-side credential for one user and one SCRAM mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def scram_credential(
    mechanism: str, password: str, *, iterations: int = SCRAM_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """The credential for `password`: SaltedPassword = PBKDF2(password, salt, iterations),
    StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    "Server Key")."""
    name = SCRAM_HASHES[mechanism]
    salt = os.urandom(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(salt, hashlib.new(name, client_key).digest(), server_key, iterations)


@dataclasses.dataclass(frozen=True)
class Peer:
    """Who is signing in: the connection's address and the client id its requests carry."""

    address: str
    client_id: str | None = None


class Authenticator(Protocol):
    """The users the listener authenticates. Every method is blocking (called on the
    listener's thread pool) and answers False / None / Role.NONE for unknown or inactive
    users. `check_plain` and `scram_credential` may raise `AuthenticationFailed` to refuse
    `peer` before any password is checked (too many failed sign-ins)."""

    def check_plain(self, user: str, password: str, peer: Peer) -> bool: ...

    def scram_credential(self, user: str, mechanism: str, peer: Peer) -> ScramCredential | None: ...

    def scram_result(self, user: str, mechanism: str, peer: Peer, ok: bool) -> None:
        """Told whether `user`'s SCRAM proof from `peer` matched (unknown users: False)."""
        ...

    def role(self, user: str) -> Role: ...


@runtime_checkable
class ScopedAuthenticator(Authenticator, Protocol):
    """An `Authenticator` whose users' roles can differ per topic and group."""

    def grants(self, user: str) -> Grants | None:
        """`user`'s roles per resource (None: `role` holds everywhere)."""
        ...


class AuthenticationFailed(Exception):
    """The client's credentials were refused; the message is what the client is told."""


class SaslExchange:
    """The server side of one SASL authentication with `mechanism` (one of `MECHANISMS`).

    Feed each client token to `step`; it returns the server's token, or raises
    AuthenticationFailed. Once `done`, `user` is the authenticated user.
    """

    def __init__(self, mechanism: str, authenticator: Authenticator, peer: Peer):
        if mechanism not in MECHANISMS:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
        self.mechanism = mechanism
        self.authenticator = authenticator
        self.peer = peer
        self.done = False
        self.user: str | None = None
        self._scram = None
        self._scram_user: str | None = None  # the user the client-first message names

    def step(self, token: bytes) -> bytes:
        if self.done:
            raise AuthenticationFailed("Authentication failed: the exchange is complete")
        if self.mechanism == PLAIN:
            return self._plain(token)
        return self._scram_step(token)

    # ------------------------------------------------------------------ PLAIN

    def _plain(self, token: bytes) -> bytes:
        """RFC 4616: ``authzid NUL authcid NUL passwd``."""
        try:
            authzid, user, password = (part.decode("utf-8") for part in token.split(b"\0"))
        except ValueError:  # not three parts, or not UTF-8
            raise AuthenticationFailed("Authentication failed: invalid PLAIN token") from None
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if not user or not self.authenticator.check_plain(user, password, self.peer):
            raise AuthenticationFailed(FAILED)
        self.user, self.done = user, True
        return b""

    # ------------------------------------------------------------------ SCRAM

    def _scram_step(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Authentication failed: invalid SCRAM message") from None
        if self._scram is None:
            try:
                self._scram = scramp.ScramMechanism(self.mechanism).make_server(self._lookup)
                self._scram.set_client_first(message)
                return self._scram.get_server_first().encode("utf-8")
            except scramp.ScramException as exc:
                if isinstance(exc.__cause__, AuthenticationFailed):  # scramp wraps _lookup's
                    raise exc.__cause__ from None  # the authenticator refused (locked out)
                raise AuthenticationFailed(FAILED) from None
        try:
            final = self._legacy_final(message)
            if final is None:
                self._scram.set_client_final(message)
                final = self._scram.get_server_final()
            ok = self.user is not None  # a decoy credential (unknown user) cannot have matched
        except (scramp.ScramException, AuthenticationFailed):
            ok = False
        self.authenticator.scram_result(self._scram_user, self.mechanism, self.peer, ok)
        if not ok:
            raise AuthenticationFailed(FAILED)
        self.done = True
        return final.encode("utf-8")

    def _legacy_final(self, message: str) -> str | None:
        """The server-final message for librdkafka before 2.6.1 (Debian's kcat), whose
        client-final message carries ``r=`` the client nonce followed by the whole server
        nonce (which already starts with it; librdkafka #4895): Kafka 3.8.1 to 3.9 accept it,
        Kafka 4 does not. Accepted in exactly that form, the proof checked as RFC 5802 says
        over the message as sent, so the exchange is still bound to this server's nonce.
        None for any other message (scramp checks those)."""
        server = self._scram
        nonce, s_nonce = str(server.nonce), str(server.s_nonce)
        without_proof, sep, proof = message.rpartition(",p=")
        attrs = dict(a.split("=", 1) for a in without_proof.split(",") if "=" in a)
        legacy = nonce[: len(nonce) - len(s_nonce)] + nonce
        if not sep or attrs.get("c") != "biws" or attrs.get("r") != legacy:
            return None
        name = SCRAM_HASHES[self.mechanism]
        auth = ",".join((server.client_first_bare, server.server_first, without_proof))
        signature = hmac.new(server.stored_key, auth.encode(), name).digest()
        try:
            sent = base64.b64decode(proof, validate=True)
        except binascii.Error:
            raise AuthenticationFailed(FAILED) from None
        client_key = bytes(a ^ b for a, b in zip(signature, sent, strict=False))
        if len(sent) != len(signature) or not hmac.compare_digest(
            hashlib.new(name, client_key).digest(), server.stored_key
        ):
            raise AuthenticationFailed(FAILED)
        server_signature = hmac.new(server.server_key, auth.encode(), name).digest()
        return "v=" + base64.b64encode(server_signature).decode()

    def _lookup(self, saslname: str) -> tuple[bytes, bytes, bytes, int]:
        """scramp's auth_fn: the credential of the user the client-first message names. An
        unknown user gets a decoy, so the exchange fails at the proof as a wrong password
        does, without telling which users exist (RFC 5802, section 5.1)."""
        user = saslname.replace("=2C", ",").replace("=3D", "=")
        self._scram_user = user
        cred = (
            self.authenticator.scram_credential(user, self.mechanism, self.peer) if user else None
        )
        if cred is None:
            cred = _decoy(user, self.mechanism)
        else:
            self.user = user
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations


_DECOY_KEY = os.urandom(32)


def _decoy(user: str, mechanism: str) -> ScramCredential:
    name = SCRAM_HASHES[mechanism]
    salt = hmac.new(_DECOY_KEY, f"{mechanism}\0{user}".encode(), "sha256").digest()
    size = hashlib.new(name).digest_size
    return ScramCredential(salt, os.urandom(size), os.urandom(size), SCRAM_ITERATIONS)
