"""Kafka's ACL vocabulary: resource types, pattern types, operations and permissions with their
wire codes (org.apache.kafka.common.{resource,acl}), a binding (resource pattern + access
control entry), and the filters DescribeAcls and DeleteAcls match bindings with.

`AclFilter.matches` is Kafka's ``AclBindingFilter.matches``: a filter's pattern type ANY
matches every pattern type by exact name, MATCH also matches the literal ``*`` and the prefixed
patterns the name starts with; a null name, principal or host matches any.
"""

from __future__ import annotations

import dataclasses
import enum
import json


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"  # a literal resource name or host matching every one; User:* every user
CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name
SERVED_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)

# an ALLOW of these operations also allows DESCRIBE (DESCRIBE_CONFIGS), as in Kafka
IMPLIES_DESCRIBE = frozenset(
    {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER, Operation.DESCRIBE}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS})


class InvalidAcl(ValueError):
    """A binding or filter Kafka would refuse with INVALID_REQUEST; the message says why."""


@dataclasses.dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # an address, or "*"
    operation: Operation
    permission: Permission

    def check(self) -> AclBinding:
        """Itself, or InvalidAcl saying what Kafka's CreateAcls would refuse."""
        if self.resource_type not in SERVED_TYPES:
            raise InvalidAcl(
                f"resource type {_name(ResourceType, self.resource_type)}: ACLs are for TOPIC, "
                "GROUP, CLUSTER or TRANSACTIONAL_ID"
            )
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(
                f"pattern type {_name(PatternType, self.pattern_type)}: an ACL's pattern is "
                "LITERAL or PREFIXED"
            )
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidAcl(f"operation {_name(Operation, self.operation)}: name an operation")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(
                f"permission {_name(Permission, self.permission)}: an ACL ALLOWs or DENYs"
            )
        if not self.name:
            raise InvalidAcl("the resource name is empty")
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAcl(f"the cluster resource is named {CLUSTER_NAME!r}, not {self.name!r}")
        kind, sep, who = self.principal.partition(":")
        if not sep or not kind or not who:
            raise InvalidAcl(f"principal {self.principal!r}: expected TYPE:NAME, e.g. User:alice")
        if kind != "User":
            raise InvalidAcl(f"principal {self.principal!r}: only User principals exist here")
        if not self.host:
            raise InvalidAcl("the host is empty (use * for any host)")
        return self

    def key(self) -> bytes:
        """Its identity as a record key in ``__acls`` (canonical JSON)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    def to_json(self) -> dict:
        return {
            "resource_type": self.resource_type.name,
            "name": self.name,
            "pattern_type": self.pattern_type.name,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.name,
            "permission": self.permission.name,
        }

    @classmethod
    def from_json(cls, doc: dict) -> AclBinding:
        return cls(
            ResourceType[doc["resource_type"]],
            doc["name"],
            PatternType[doc["pattern_type"]],
            doc["principal"],
            doc["host"],
            Operation[doc["operation"]],
            Permission[doc["permission"]],
        )

    def describe(self) -> str:
        """As ``kafka-acls --list`` prints it, e.g. ``User:alice has ALLOW permission for
        operations: READ from hosts: * on TOPIC:LITERAL:orders``."""
        return (
            f"{self.principal} has {self.permission.name} permission for operations: "
            f"{self.operation.name} from hosts: {self.host} on "
            f"{self.resource_type.name}:{self.pattern_type.name}:{self.name}"
        )


@dataclasses.dataclass(frozen=True)
class AclFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def check(self) -> AclFilter:
        for label, enum_type, value in (
            ("resource type", ResourceType, self.resource_type),
            ("pattern type", PatternType, self.pattern_type),
            ("operation", Operation, self.operation),
            ("permission", Permission, self.permission),
        ):
            if value == 0:  # UNKNOWN: a code this broker does not know
                raise InvalidAcl(f"the filter's {label} is {_name(enum_type, value)}")
        return self

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != b.pattern_type
        ):
            return False
        if self.name is not None:
            if self.pattern_type in (PatternType.ANY, b.pattern_type):
                if self.name != b.name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:  # MATCH
                if b.name not in (self.name, WILDCARD):
                    return False
            elif not self.name.startswith(b.name):  # MATCH against a prefix
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != Operation.ANY and self.operation != b.operation:
            return False
        return self.permission == Permission.ANY or self.permission == b.permission


def member(enum_type: type[enum.IntEnum], value: int, label: str):
    """`value` as a member of `enum_type`, or InvalidAcl naming the unknown code."""
    try:
        return enum_type(value)
    except ValueError:
        raise InvalidAcl(f"unknown {label} code {value}") from None


def _name(enum_type: type[enum.IntEnum], value: int) -> str:
    try:
        return enum_type(value).name
    except ValueError:
        return f"code {value}"


def parse_super_users(value: str) -> tuple[str, ...]:
    """Kafka's ``super.users``: ``User:NAME`` principals, semicolon-separated; InvalidAcl
    naming the first that is not one."""
    users = tuple(u.strip() for u in value.split(";") if u.strip())
    for user in users:
        if not user.startswith("User:") or user == "User:":
            raise InvalidAcl(f"{user!r} is not User:NAME (e.g. User:admin;User:ops)")
    return users
