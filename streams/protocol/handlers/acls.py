"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31) over the broker's ACLs
(``streams.acl``, ``BrokerContext.acls``).

As Kafka answers them: a listener without SASL has no principals to authorise, so the three
answer SECURITY_DISABLED ("No Authorizer is configured"); a binding or filter Kafka would refuse
(an unknown operation or resource type, a pattern type other than LITERAL or PREFIXED in a
creation, a principal that is not ``User:NAME``, a cluster resource not named
``kafka-cluster``) is INVALID_REQUEST with the reason, per creation or per filter, the others
of the request going ahead. Who may call them is decided before (``authz``: DESCRIBE on the
cluster for DescribeAcls, ALTER for the other two).
"""

from __future__ import annotations

from typing import Any

from streams.acl import AclBinding, AclFilter, InvalidAcl
from streams.acl.model import Operation, PatternType, Permission, ResourceType, member
from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import BrokerContext, ErrorCode

SECURITY_DISABLED = 54
NO_AUTHORIZER = "No Authorizer is configured on the broker (the listener has no SASL users)"


def _filter(f, version: int) -> AclFilter:
    return AclFilter(
        member(ResourceType, f.resource_type_filter, "resource type"),
        f.resource_name_filter,
        member(PatternType, f.pattern_type_filter if version >= 1 else 3, "pattern type"),
        f.principal_filter,
        f.host_filter,
        member(Operation, f.operation, "operation"),
        member(Permission, f.permission_type, "permission"),
    ).check()


async def handle_describe_acls(ctx: BrokerContext, req: Request) -> Any:
    cls = codec.response_class(req.api_key)
    if ctx.acls is None:
        return codec.make_response(
            req,
            throttle_time_ms=0,
            error_code=SECURITY_DISABLED,
            error_message=NO_AUTHORIZER,
            resources=[],
        )
    try:
        flt = _filter(req.body, req.api_version)
    except InvalidAcl as exc:
        return codec.make_response(
            req,
            throttle_time_ms=0,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=str(exc),
            resources=[],
        )
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in ctx.acls.describe(flt):
        by_resource.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    resources = [
        cls.DescribeAclsResource(
            resource_type=rtype,
            resource_name=name,
            pattern_type=ptype,
            acls=[
                cls.DescribeAclsResource.AclDescription(
                    principal=b.principal,
                    host=b.host,
                    operation=b.operation,
                    permission_type=b.permission,
                )
                for b in bindings
            ],
        )
        for (rtype, name, ptype), bindings in by_resource.items()
    ]
    return codec.make_response(
        req, throttle_time_ms=0, error_code=0, error_message=None, resources=resources
    )


async def handle_create_acls(ctx: BrokerContext, req: Request) -> Any:
    cls = codec.response_class(req.api_key).AclCreationResult
    results = []
    for c in req.body.creations:
        if ctx.acls is None:
            results.append(cls(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER))
            continue
        try:
            binding = AclBinding(
                member(ResourceType, c.resource_type, "resource type"),
                c.resource_name,
                member(
                    PatternType,
                    c.resource_pattern_type if req.api_version >= 1 else 3,
                    "pattern type",
                ),
                c.principal,
                c.host,
                member(Operation, c.operation, "operation"),
                member(Permission, c.permission_type, "permission"),
            ).check()
        except InvalidAcl as exc:
            results.append(
                cls(error_code=ErrorCode.INVALID_REQUEST, error_message=f"Invalid ACL: {exc}")
            )
            continue
        await ctx.blocking(ctx.acls.create, [binding])
        results.append(cls(error_code=0, error_message=None))
    return codec.make_response(req, throttle_time_ms=0, results=results)


async def handle_delete_acls(ctx: BrokerContext, req: Request) -> Any:
    cls = codec.response_class(req.api_key).DeleteAclsFilterResult
    matching = cls.DeleteAclsMatchingAcl
    results = []
    for f in req.body.filters:
        if ctx.acls is None:
            results.append(
                cls(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])
            )
            continue
        try:
            flt = _filter(f, req.api_version)
        except InvalidAcl as exc:
            results.append(
                cls(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), matching_acls=[])
            )
            continue
        removed = await ctx.blocking(ctx.acls.delete, flt)
        results.append(
            cls(
                error_code=0,
                error_message=None,
                matching_acls=[
                    matching(
                        error_code=0,
                        error_message=None,
                        resource_type=b.resource_type,
                        resource_name=b.name,
                        pattern_type=b.pattern_type,
                        principal=b.principal,
                        host=b.host,
                        operation=b.operation,
                        permission_type=b.permission,
                    )
                    for b in removed
                ],
            )
        )
    return codec.make_response(req, throttle_time_ms=0, filter_results=results)
