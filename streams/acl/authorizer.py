"""The broker's ACLs: kept in the compacted internal topic ``__acls`` (one record per binding,
its canonical JSON as key and value; a deletion is the key's tombstone), folded into memory at
start, and evaluated as Kafka's StandardAuthorizer evaluates them.

`Acls.decide(principal, host, operation, resource_type, name)` answers, in Kafka's order:

1. a super user (``super.users``, e.g. ``User:admin``) is allowed everything;
2. a DENY binding that matches wins: its resource pattern matches the resource (a LITERAL of
   that name or ``*``, or a PREFIXED the name starts with), its principal is the principal or
   ``User:*``, its host the client's or ``*``, its operation the operation or ALL;
3. an ALLOW binding that matches allows; ALLOW of READ, WRITE, DELETE or ALTER also allows
   DESCRIBE, ALLOW of ALTER_CONFIGS also DESCRIBE_CONFIGS;
4. otherwise no binding decides (`None`): the caller falls back to what it allows without ACLs
   (on Tidelog's listener, the principal's console role: ``streams.protocol.authz``).

Thread-safe: one lock around the bindings; `create` and `delete` append to the log before
they change what `decide` sees, so an acknowledged change survives a crash.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence

from streams.acl.model import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from streams.log import KeyedLog

ACLS_TOPIC = "__acls"


class Acls:
    def __init__(self, log: KeyedLog, *, super_users: Iterable[str] = ()):
        self._log = log
        self.super_users = frozenset(super_users)
        self._lock = threading.Lock()
        self._bindings: dict[bytes, AclBinding] = {}
        for key, value in log.records():
            if value is None:
                self._bindings.pop(key, None)
            else:
                self._bindings[key] = AclBinding.from_json(json.loads(value))

    # ------------------------------------------------------------------ decisions

    def decide(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool | None:
        """True (allowed), False (denied) or None (no binding matches: not decided)."""
        if principal in self.super_users:
            return True
        with self._lock:
            bindings = list(self._bindings.values())
        allowed = False
        for b in bindings:
            if not _applies(b, principal, host, resource_type, name):
                continue
            if b.permission == Permission.DENY:
                if b.operation in (Operation.ALL, operation):
                    return False
            elif _allows(b.operation, operation):
                allowed = True
        return True if allowed else None

    def empty_for(self, principal: str) -> bool:
        """True when nothing here can change what `principal` (``User:alice``) may do: no
        bindings, and not a super user (the fast path of every request)."""
        if principal in self.super_users:
            return False
        with self._lock:
            return not self._bindings

    # ------------------------------------------------------------------ changes

    def create(self, bindings: Sequence[AclBinding]) -> None:
        """Add checked bindings (an existing one is kept as it is, as Kafka does)."""
        for b in bindings:
            key = b.key()
            with self._lock:
                if key in self._bindings:
                    continue
            self._log.append(key, key)
            with self._lock:
                self._bindings[key] = b

    def delete(self, flt: AclFilter) -> list[AclBinding]:
        """Remove every binding `flt` matches; the removed ones."""
        removed = []
        for key, b in self._matching(flt):
            self._log.append(key, None)
            with self._lock:
                self._bindings.pop(key, None)
            removed.append(b)
        return removed

    def describe(self, flt: AclFilter) -> list[AclBinding]:
        """The bindings `flt` matches, in a stable order."""
        return [b for _key, b in self._matching(flt)]

    def _matching(self, flt: AclFilter) -> list[tuple[bytes, AclBinding]]:
        with self._lock:
            items = sorted(self._bindings.items())
        return [(k, b) for k, b in items if flt.matches(b)]


def _applies(b: AclBinding, principal: str, host: str, rtype: ResourceType, name: str) -> bool:
    if b.resource_type != rtype:
        return False
    if b.pattern_type == PatternType.LITERAL:
        if b.name != name and b.name != WILDCARD:
            return False
    elif not name.startswith(b.name):  # PREFIXED
        return False
    if b.principal != principal and b.principal != "User:*":
        return False
    return b.host == host or b.host == WILDCARD


def _allows(granted: Operation, wanted: Operation) -> bool:
    if granted in (Operation.ALL, wanted):
        return True
    if wanted == Operation.DESCRIBE:
        return granted in IMPLIES_DESCRIBE
    if wanted == Operation.DESCRIBE_CONFIGS:
        return granted in IMPLIES_DESCRIBE_CONFIGS
    return False
