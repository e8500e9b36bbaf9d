"""The API table: which Kafka API keys and versions the listener serves, and their handlers.

Every range starts at 0: librdkafka before 2.11 (Debian's kcat) enables a feature only when
one exact old version lies inside the broker's range (compression needs Produce v0, the group
coordinator FindCoordinator v0, ...), and Apache Kafka 4 keeps advertising those versions for
the same reason. Requests of such old versions that need a pre-v2 message format (Produce v0-2)
are answered with UNSUPPORTED_VERSION; no current client sends them.

A handler is either *serial* — an ``async def`` awaited to completion before the next request
of the connection starts, as Kafka processes one request per connection at a time — or
*pipelined*: a plain function doing its ordered part at once and returning an awaitable for the
rest (Produce: write now, wait for the disk later; Fetch: long-poll), so later requests of the
connection proceed meanwhile. Responses always go out in request order.

Topic ids (KIP-516): Metadata v10+ carries them; Produce v13, Fetch v13+, OffsetCommit v10,
OffsetFetch v10 and DeleteTopics v6 name topics by id, resolved through the log store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from streams.protocol.handlers import (
    acls,
    admin,
    fetch,
    groups,
    metadata,
    offsets,
    produce,
    sasl,
    transactions,
)


class Api(NamedTuple):
    key: int
    max_version: int
    handler: Callable[..., Any]
    pipelined: bool = False
    min_version: int = 0


APIS: dict[int, Api] = {
    api.key: api
    for api in (
        Api(0, 13, produce.handle_produce, pipelined=True),
        Api(1, 16, fetch.handle_fetch, pipelined=True),
        Api(2, 7, offsets.handle_list_offsets),
        Api(3, 13, metadata.handle_metadata),
        Api(8, 10, offsets.handle_offset_commit),
        Api(9, 10, offsets.handle_offset_fetch),
        Api(10, 6, metadata.handle_find_coordinator),
        Api(11, 9, groups.handle_join_group),
        Api(12, 4, groups.handle_heartbeat),
        Api(13, 5, groups.handle_leave_group),
        Api(14, 5, groups.handle_sync_group),
        Api(15, 5, groups.handle_describe_groups),
        Api(16, 5, groups.handle_list_groups),
        Api(17, 1, sasl.handle_sasl_handshake),
        Api(18, 4, metadata.handle_api_versions),
        Api(19, 7, admin.handle_create_topics),
        Api(20, 6, admin.handle_delete_topics),
        Api(21, 2, admin.handle_delete_records),
        Api(22, 4, produce.handle_init_producer_id),
        Api(23, 4, offsets.handle_offset_for_leader_epoch),
        Api(24, 3, transactions.handle_add_partitions_to_txn),
        Api(25, 4, transactions.handle_add_offsets_to_txn),
        Api(26, 5, transactions.handle_end_txn),
        Api(28, 4, transactions.handle_txn_offset_commit),
        Api(29, 3, acls.handle_describe_acls),
        Api(30, 3, acls.handle_create_acls),
        Api(31, 3, acls.handle_delete_acls),
        Api(32, 4, admin.handle_describe_configs),
        Api(33, 2, admin.handle_alter_configs),
        Api(36, 2, sasl.handle_sasl_authenticate),
        Api(37, 3, admin.handle_create_partitions),
        Api(42, 2, groups.handle_delete_groups),
        Api(44, 1, admin.handle_incremental_alter_configs),
        Api(47, 0, offsets.handle_offset_delete),
        Api(60, 1, metadata.handle_describe_cluster),
        Api(61, 0, transactions.handle_describe_producers),
        Api(65, 0, transactions.handle_describe_transactions),
        Api(66, 1, transactions.handle_list_transactions),
    )
}

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    key: (api.min_version, api.max_version) for key, api in APIS.items()
}
