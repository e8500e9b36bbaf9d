"""Users of a standalone listener (``python -m streams.protocol --sasl-users FILE``), as Kafka's
JAAS file lists them for a broker's PLAIN and SCRAM listeners.

One user per line: ``user:password[:role]``, the role ``operator`` (the default: may change
things) or ``viewer`` (may only read); ``#`` starts a comment. Passwords are kept in memory only
as SCRAM credentials (salted, 8192 iterations, one per mechanism) and a SHA-256 for PLAIN, so a
memory dump of the broker does not hold them in clear. In the console, users come from its
own database instead (``brokerui.kafkaport.adapters.ConsoleAuthenticator``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from streams.errors import InvalidConfig
from streams.protocol.security import (
    SCRAM_HASHES,
    Peer,
    Role,
    ScramCredential,
    scram_credential,
)

ROLES = {"operator": Role.OPERATOR, "viewer": Role.VIEWER}


class FileUsers:
    """An `Authenticator` (``streams.protocol.security``) over a users file."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self._plain: dict[str, tuple[bytes, bytes]] = {}  # user -> (salt, sha256(salt + pw))
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        self._roles: dict[str, Role] = {}
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InvalidConfig("--sasl-users", self.path, exc.strerror or str(exc)) from None
        for n, raw in enumerate(lines, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            user, sep, rest = line.partition(":")
            password, _, role = rest.partition(":")
            role = role.strip().lower() or "operator"
            if not sep or not user or not password:
                raise InvalidConfig("--sasl-users", f"line {n}", "expected user:password[:role]")
            if role not in ROLES:
                raise InvalidConfig(
                    "--sasl-users", f"line {n}", f"the role is operator or viewer, not {role!r}"
                )
            salt = os.urandom(16)
            self._plain[user] = (salt, hashlib.sha256(salt + password.encode()).digest())
            for mechanism in SCRAM_HASHES:
                self._scram[(user, mechanism)] = scram_credential(mechanism, password)
            self._roles[user] = ROLES[role]

    def __len__(self) -> int:
        return len(self._roles)

    def check_plain(self, user: str, password: str, peer: Peer) -> bool:
        found = self._plain.get(user)
        if found is None:
            return False
        salt, digest = found
        return hmac.compare_digest(digest, hashlib.sha256(salt + password.encode()).digest())

    def scram_credential(self, user: str, mechanism: str, peer: Peer) -> ScramCredential | None:
        return self._scram.get((user, mechanism))

    def scram_result(self, user: str, mechanism: str, peer: Peer, ok: bool) -> None:
        pass

    def role(self, user: str) -> Role:
        return self._roles.get(user, Role.NONE)
