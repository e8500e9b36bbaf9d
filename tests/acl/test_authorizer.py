"""Kafka's ACL semantics (streams.acl): which bindings match a resource, deny before allow,
implied DESCRIBE, super users, the filters of DescribeAcls/DeleteAcls, what CreateAcls refuses,
and the bindings folded back from ``__acls`` (tombstones delete)."""

from __future__ import annotations

import pytest

from streams.acl import AclBinding, AclFilter, Acls, InvalidAcl
from streams.acl.model import Operation as Op
from streams.acl.model import PatternType as P
from streams.acl.model import Permission as Perm
from streams.acl.model import ResourceType as RT


class ListLog:
    def __init__(self):
        self.entries: list[tuple[bytes, bytes | None]] = []

    def records(self):
        return list(self.entries)

    def append(self, key, value):
        self.entries.append((key, value))


def acl(name, op=Op.READ, perm=Perm.ALLOW, *, rtype=RT.TOPIC, pattern=P.LITERAL,
        principal="User:alice", host="*"):  # fmt: skip
    return AclBinding(rtype, name, pattern, principal, host, op, perm).check()


def acls(*bindings, super_users=()):
    a = Acls(ListLog(), super_users=super_users)
    a.create(list(bindings))
    return a


def decide(a, name, op=Op.READ, *, rtype=RT.TOPIC, who="User:alice", host="10.0.0.1"):
    return a.decide(who, host, op, rtype, name)


def test_literal_prefixed_and_wildcard_patterns():
    a = acls(acl("orders"), acl("team-a.", Op.WRITE, pattern=P.PREFIXED), acl("*", Op.DESCRIBE))
    assert decide(a, "orders") is True
    assert decide(a, "orders-eu") is None  # a literal is the whole name
    assert decide(a, "team-a.clicks", Op.WRITE) is True
    assert decide(a, "team-b.clicks", Op.WRITE) is None
    assert decide(a, "anything", Op.DESCRIBE) is True  # the literal *


def test_deny_wins_over_allow_and_all_covers_every_operation():
    a = acls(acl("orders", Op.ALL), acl("orders", Op.WRITE, Perm.DENY))
    assert decide(a, "orders", Op.READ) is True
    assert decide(a, "orders", Op.WRITE) is False
    b = acls(acl("orders", Op.READ), acl("ord", Op.ALL, Perm.DENY, pattern=P.PREFIXED))
    assert decide(b, "orders", Op.READ) is False  # a prefixed DENY beats a literal ALLOW


def test_principal_and_host_must_match():
    a = acls(acl("t", principal="User:*"), acl("u", host="10.0.0.9"))
    assert decide(a, "t", who="User:bob") is True
    assert decide(a, "u") is None  # alice, but from 10.0.0.1
    assert decide(a, "u", host="10.0.0.9") is True
    assert decide(a, "t", rtype=RT.GROUP) is None  # another resource type


def test_read_write_delete_alter_imply_describe_and_alter_configs_describe_configs():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert decide(acls(acl("t", op)), "t", Op.DESCRIBE) is True
    assert decide(acls(acl("t", Op.CREATE)), "t", Op.DESCRIBE) is None
    assert decide(acls(acl("t", Op.ALTER_CONFIGS)), "t", Op.DESCRIBE_CONFIGS) is True
    assert decide(acls(acl("t", Op.DESCRIBE)), "t", Op.READ) is None
    # a DENY of READ does not deny DESCRIBE
    assert decide(acls(acl("t", Op.ALL), acl("t", Op.READ, Perm.DENY)), "t", Op.DESCRIBE)


def test_super_users_pass_even_a_deny():
    a = acls(acl("t", Op.ALL, Perm.DENY, principal="User:*"), super_users={"User:root"})
    assert decide(a, "t", who="User:root") is True
    assert decide(a, "t", who="User:alice") is False
    assert not a.empty_for("User:root") and not a.empty_for("User:alice")
    assert Acls(ListLog()).empty_for("User:alice")


def test_filters_as_describe_and_delete_match_them():
    bindings = [
        acl("orders"), acl("ord", pattern=P.PREFIXED), acl("*"), acl("other"),
        acl("g", rtype=RT.GROUP, principal="User:bob"),
    ]  # fmt: skip
    a = acls(*bindings)

    def names(rtype=RT.ANY, name=None, pattern=P.ANY, principal=None, op=Op.ANY):
        flt = AclFilter(rtype, name, pattern, principal, None, op, Perm.ANY).check()
        return sorted(b.name for b in a.describe(flt))

    assert names() == ["*", "g", "ord", "orders", "other"]
    assert names(RT.TOPIC, "orders", P.LITERAL) == ["orders"]
    assert names(RT.TOPIC, "orders", P.ANY) == ["orders"]  # exact name, any pattern type
    assert names(RT.TOPIC, "orders", P.MATCH) == ["*", "ord", "orders"]  # what applies to it
    assert names(RT.TOPIC, None, P.PREFIXED) == ["ord"]
    assert names(principal="User:bob") == ["g"]
    assert names(op=Op.WRITE) == []
    removed = a.delete(AclFilter(RT.TOPIC, "orders", P.MATCH, None, None, Op.ANY, Perm.ANY))
    assert sorted(b.name for b in removed) == ["*", "ord", "orders"]
    assert names() == ["g", "other"]


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (dict(rtype=RT.ANY), "resource type ANY"),
        (dict(rtype=RT.USER), "resource type USER"),
        (dict(pattern=P.MATCH), "pattern type MATCH"),
        (dict(op=Op.ANY), "operation ANY"),
        (dict(perm=Perm.ANY), "permission ANY"),
        (dict(principal="alice"), "expected TYPE:NAME"),
        (dict(principal="Group:ops"), "only User principals"),
        (dict(host=""), "host is empty"),
        (dict(rtype=RT.CLUSTER), "is named 'kafka-cluster'"),
    ],
)
def test_what_create_refuses(binding, reason):
    fields = {"name": "t", "op": Op.READ, "perm": Perm.ALLOW, "rtype": RT.TOPIC,
              "pattern": P.LITERAL, "principal": "User:a", "host": "*", **binding}  # fmt: skip
    b = AclBinding(fields["rtype"], fields["name"], fields["pattern"], fields["principal"],
                   fields["host"], fields["op"], fields["perm"])  # fmt: skip
    with pytest.raises(InvalidAcl, match=reason):
        b.check()


def test_the_bindings_come_back_from_the_log_without_the_deleted_ones():
    log = ListLog()
    a = Acls(log)
    a.create([acl("keep"), acl("drop"), acl("keep")])  # the same binding twice: kept once
    a.delete(AclFilter(RT.TOPIC, "drop", P.LITERAL, None, None, Op.ANY, Perm.ANY))
    assert len(log.entries) == 3 and log.entries[-1][1] is None  # two creations, a tombstone
    again = Acls(log)
    everything = AclFilter(RT.ANY, None, P.ANY, None, None, Op.ANY, Perm.ANY)
    assert [b.name for b in again.describe(everything)] == ["keep"]
    assert acl("keep").describe() == (
        "User:alice has ALLOW permission for operations: READ from hosts: * on TOPIC:LITERAL:keep"
    )


def test_super_users_are_parsed_once_for_the_cli_and_the_console():
    from streams.acl.model import parse_super_users

    assert parse_super_users(" User:admin; ;User:ops ") == ("User:admin", "User:ops")
    for bad in ("admin", "User:", "Group:ops"):
        with pytest.raises(InvalidAcl, match="is not User:NAME"):
            parse_super_users(bad)
