"""Kafka's ACLs on Tidelog's broker: the vocabulary (`model`) and the bindings kept in
``__acls`` and evaluated as Kafka does (`authorizer`). The Kafka port serves DescribeAcls,
CreateAcls and DeleteAcls over them and enforces them (``streams.protocol.authz``)."""

from streams.acl.authorizer import ACLS_TOPIC, Acls
from streams.acl.model import (
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

__all__ = [
    "ACLS_TOPIC",
    "AclBinding",
    "AclFilter",
    "Acls",
    "InvalidAcl",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
]
