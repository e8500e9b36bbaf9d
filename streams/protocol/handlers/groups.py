"""Consumer group membership over the wire: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ListGroups, DescribeGroups and DeleteGroups, all served by the broker's one `GroupCoordinator`
(the same one the Python consumer and the console use, so a group is one group everywhere).

Coordinator calls take its lock and may write ``__consumer_offsets``; they run on the
listener's thread pool, and the JoinGroup/SyncGroup futures are awaited without blocking the
loop (``asyncio.wrap_future``).

Thread-safety: handlers run on the listener's event loop, one request of a connection at a
time (Produce and Fetch overlap later requests, see ``handlers``); blocking engine calls go
through ``BrokerContext.blocking``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from streams.errors import GroupError, UnknownGroup
from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import BrokerContext, ErrorCode, domain_error_code

CLASSIC = "classic"
STABLE = "Stable"


async def handle_join_group(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    if not b.group_id:
        return _join_error(req, ErrorCode.INVALID_GROUP_ID)
    rebalance_timeout = b.rebalance_timeout_ms if req.api_version >= 1 else -1
    try:
        fut = await ctx.blocking(
            lambda: ctx.coordinator.join_group(
                b.group_id,
                b.member_id,
                client_id=req.client_id or "",
                host=req.client_host,
                session_timeout_ms=b.session_timeout_ms,
                rebalance_timeout_ms=(
                    rebalance_timeout if rebalance_timeout > 0 else b.session_timeout_ms
                ),
                protocol_type=b.protocol_type,
                protocols=[(p.name, bytes(p.metadata)) for p in b.protocols],
            )
        )
        result = await asyncio.wrap_future(fut)
    except GroupError as exc:
        return _join_error(req, domain_error_code(exc), b.member_id)
    member_cls = codec.response_class(req.api_key).JoinGroupResponseMember
    return codec.make_response(
        req,
        throttle_time_ms=0,
        error_code=0,
        generation_id=result.generation,
        protocol_type=b.protocol_type,
        protocol_name=result.protocol,
        leader=result.leader_id,
        skip_assignment=False,
        member_id=result.member_id,
        members=[
            member_cls(member_id=mid, group_instance_id=None, metadata=meta)
            for mid, meta in result.members
        ],
    )


def _join_error(req: Request, code: int, member_id: str = ""):
    return codec.make_response(
        req,
        throttle_time_ms=0,
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if req.api_version >= 7 else "",
        leader="",
        member_id=member_id,
        members=[],
    )


async def handle_sync_group(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    assignments = {a.member_id: bytes(a.assignment) for a in b.assignments}
    try:
        fut = await ctx.blocking(
            ctx.coordinator.sync_group, b.group_id, b.generation_id, b.member_id, assignments
        )
        assignment = await asyncio.wrap_future(fut)
        code = 0
    except GroupError as exc:
        assignment, code = b"", domain_error_code(exc)
    return codec.make_response(
        req,
        throttle_time_ms=0,
        error_code=code,
        protocol_type=b.protocol_type,
        protocol_name=b.protocol_name,
        assignment=assignment,
    )


async def handle_heartbeat(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    code = await _call(ctx, ctx.coordinator.heartbeat, b.group_id, b.generation_id, b.member_id)
    return codec.make_response(req, throttle_time_ms=0, error_code=code)


async def handle_leave_group(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    if req.api_version < 3:
        code = await _call(ctx, ctx.coordinator.leave_group, b.group_id, b.member_id)
        return codec.make_response(req, throttle_time_ms=0, error_code=code)
    member_cls = codec.response_class(req.api_key).MemberResponse
    members = []
    for m in b.members:
        code = await _call(ctx, ctx.coordinator.leave_group, b.group_id, m.member_id)
        members.append(
            member_cls(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code
            )
        )
    return codec.make_response(req, throttle_time_ms=0, error_code=0, members=members)


async def _call(ctx: BrokerContext, fn, *args) -> int:
    """Run a coordinator call off the loop; its error code (0 when it succeeded)."""
    try:
        await ctx.blocking(fn, *args)
        return 0
    except GroupError as exc:
        return domain_error_code(exc)


async def handle_list_groups(ctx: BrokerContext, req: Request) -> Any:
    b = req.body
    states = set(b.states_filter or ()) if req.api_version >= 4 else set()
    types = {t.lower() for t in b.types_filter or ()} if req.api_version >= 5 else set()
    listed_cls = codec.response_class(req.api_key).ListedGroup
    groups = []
    for group_id, state in ctx.coordinator.list_groups():
        if (states and state not in states) or (types and CLASSIC not in types):
            continue
        try:
            protocol_type = ctx.coordinator.describe_group(group_id).protocol_type
        except UnknownGroup:
            continue  # deleted meanwhile
        groups.append(
            listed_cls(
                group_id=group_id,
                protocol_type=protocol_type,
                group_state=state,
                group_type=CLASSIC,
            )
        )
    return codec.make_response(req, throttle_time_ms=0, error_code=0, groups=groups)


async def handle_describe_groups(ctx: BrokerContext, req: Request) -> Any:
    cls = codec.response_class(req.api_key).DescribedGroup
    return codec.make_response(
        req, throttle_time_ms=0, groups=[_describe(ctx, cls, g) for g in req.body.groups]
    )


def _describe(ctx: BrokerContext, cls, group_id: str):
    try:
        d = ctx.coordinator.describe_group(group_id)
    except UnknownGroup:  # Kafka describes an unknown group as Dead with no members
        return cls(
            error_code=0,
            group_id=group_id,
            group_state="Dead",
            protocol_type="",
            protocol_data="",
            members=[],
        )
    # the members' own bytes, as Kafka returns them: clients decode them with their own
    # (possibly newer or custom) subscription and assignment formats
    members = [
        cls.DescribedGroupMember(
            member_id=m.member_id,
            group_instance_id=None,
            client_id=m.client_id,
            client_host=m.host,
            member_metadata=m.protocol_metadata,
            member_assignment=m.assignment_bytes,
        )
        for m in d.members
    ]
    stable = d.state == STABLE
    return cls(
        error_code=0,
        group_id=d.group_id,
        group_state=d.state,
        protocol_type=d.protocol_type,
        protocol_data=(d.protocol or "") if stable else "",  # Kafka: only once Stable
        members=members,
    )


async def handle_delete_groups(ctx: BrokerContext, req: Request) -> Any:
    result_cls = codec.response_class(req.api_key).DeletableGroupResult
    results = []
    for group_id in req.body.groups_names:
        code = await _call(ctx, ctx.coordinator.delete_group, group_id)
        results.append(result_cls(group_id=group_id, error_code=code))
    return codec.make_response(req, throttle_time_ms=0, results=results)
