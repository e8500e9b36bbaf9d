"""Role bindings and what they grant, without Django: the rules in one place.

A *binding* gives a user, or a group of users, a role (viewer or operator) on a *scope*: a
cluster as a whole, or the topics or groups whose names match a pattern in one cluster (or
in every cluster, ``*``). A pattern is a literal name, a prefix ending in ``*`` (``team-a.*``
matches ``team-a.orders``) or ``*`` for every name, as kafka-ui's and AKHQ's role bindings
read. Roles add up: a principal's role on a topic is the best role any of its bindings gives
there (operator of ``team-a.*`` and viewer of the cluster: operator on ``team-a.orders``,
viewer on ``payments``). A cluster-wide binding covers every topic and group of the cluster;
what belongs to no topic or group (alerts, jobs, capture, schemas, ACLs, transactions) needs
the role on the cluster itself.

`BindingGrants` is the one implementation of `streams.protocol.security.Grants`, so the Kafka
port decides with the same rules as the console's pages, API, WebSockets and ``/metrics``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from streams.protocol.security import Role

CLUSTER = "cluster"
TOPIC = "topic"
GROUP = "group"
KINDS = (CLUSTER, TOPIC, GROUP)
ANY_CLUSTER = "*"
ROLES = {"viewer": Role.VIEWER, "operator": Role.OPERATOR}
_PATTERN = re.compile(r"[A-Za-z0-9._\-]*\*?")  # Kafka's topic characters, an optional end *


class BadBinding(ValueError):
    """A binding that cannot be kept; the message says which field and why."""


@dataclasses.dataclass(frozen=True)
class Binding:
    role: Role
    cluster: str  # a cluster's name, or ANY_CLUSTER
    kind: str  # CLUSTER, TOPIC or GROUP
    pattern: str = "*"  # ignored for CLUSTER

    def covers_cluster(self, cluster: str) -> bool:
        return self.cluster in (ANY_CLUSTER, cluster)

    def covers(self, kind: str, name: str) -> bool:
        """Whether this binding (already known to be for the cluster) reaches `kind` `name`."""
        if self.kind == CLUSTER:
            return True
        return self.kind == kind and matches(self.pattern, name)

    def scope_text(self) -> str:
        where = "every cluster" if self.cluster == ANY_CLUSTER else f"cluster {self.cluster}"
        if self.kind == CLUSTER:
            return where
        return f"{self.kind}s {self.pattern} on {where}"


def matches(pattern: str, name: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def check_pattern(kind: str, pattern: str) -> str:
    """`pattern`, checked: a literal, a prefix ending in ``*``, or ``*`` (BadBinding)."""
    if kind not in KINDS:
        raise BadBinding(f"scope must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind == CLUSTER:
        return "*"
    pattern = pattern.strip()
    if not pattern:
        raise BadBinding(f"a {kind} scope needs a name or a prefix such as team-a.*")
    if not _PATTERN.fullmatch(pattern):
        raise BadBinding(
            f"{pattern!r} is not a {kind} name or prefix: letters, digits, '.', '_' and '-', "
            "with at most one '*', at the end"
        )
    return pattern


def role_named(name: str) -> Role:
    try:
        return ROLES[name]
    except KeyError:
        raise BadBinding(f"role must be viewer or operator, not {name!r}") from None


@dataclasses.dataclass(frozen=True)
class BindingGrants:
    """What a set of bindings grants on one cluster (`streams.protocol.security.Grants`)."""

    cluster: str
    bindings: tuple[Binding, ...]

    @classmethod
    def of(cls, cluster: str, bindings: Iterable[Binding]) -> BindingGrants:
        mine = tuple(b for b in bindings if b.covers_cluster(cluster))
        return cls(cluster, mine)

    def role_on(self, kind: str, name: str) -> Role:
        best = Role.NONE
        for b in self.bindings:
            if b.role > best and b.covers(kind, name):
                best = b.role
        return best

    def cluster_role(self) -> Role:
        """The role on the cluster itself: what belongs to no topic or group."""
        return max((b.role for b in self.bindings if b.kind == CLUSTER), default=Role.NONE)

    def highest(self) -> Role:
        return max((b.role for b in self.bindings), default=Role.NONE)

    def visible(self, kind: str, names: Iterable[str]) -> list[str]:
        """Of `names`, those this principal may at least read."""
        if self.cluster_role() >= Role.VIEWER:
            return list(names)
        return [n for n in names if self.role_on(kind, n) >= Role.VIEWER]


EVERYTHING = (Binding(Role.OPERATOR, ANY_CLUSTER, CLUSTER),)  # a superuser's
READ_EVERYTHING = (Binding(Role.VIEWER, ANY_CLUSTER, CLUSTER),)
