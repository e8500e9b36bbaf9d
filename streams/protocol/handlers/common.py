"""What every handler shares: the broker context, Kafka error codes and their mapping from the
engine's domain errors, and small helpers to run blocking engine calls off the event loop.

Thread-safety: a `BrokerContext` is created once per listener and only read afterwards; the
engine objects it holds (store, coordinators) do their own locking.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from streams.errors import (
    CorruptRecord,
    GroupError,
    InternalTopic,
    InvalidConfig,
    InvalidPartitions,
    InvalidRecord,
    InvalidTopicName,
    OffsetOutOfRange,
    OutOfOrderSequence,
    ProducerFenced,
    RecordTooLarge,
    StorageError,
    StoreClosed,
    TopicAlreadyExists,
    TransactionError,
    UnknownPartition,
    UnknownTopic,
    UnknownTopicId,
)

if TYPE_CHECKING:
    from streams.groups import GroupCoordinator
    from streams.log import LogStore
    from streams.protocol.notify import AppendNotifier
    from streams.protocol.server import ListenerConfig
    from streams.txn import TransactionCoordinator

log = logging.getLogger("streams.protocol")

T = TypeVar("T")
NODE_ID = 0


class ErrorCode(enum.IntEnum):
    """Kafka's error codes (clients/src/main/java/org/apache/kafka/common/protocol/Errors)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    MESSAGE_TOO_LARGE = 10
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    INVALID_REQUIRED_ACKS = 21
    INVALID_GROUP_ID = 24
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    PRODUCER_FENCED = 90
    UNKNOWN_TOPIC_ID = 100


_BY_TYPE: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (UnknownTopicId, ErrorCode.UNKNOWN_TOPIC_ID),  # before UnknownTopic, its base
    (UnknownTopic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (UnknownPartition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (OffsetOutOfRange, ErrorCode.OFFSET_OUT_OF_RANGE),
    (CorruptRecord, ErrorCode.CORRUPT_MESSAGE),
    (RecordTooLarge, ErrorCode.MESSAGE_TOO_LARGE),
    (InvalidRecord, ErrorCode.INVALID_RECORD),
    (TopicAlreadyExists, ErrorCode.TOPIC_ALREADY_EXISTS),
    (InvalidTopicName, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (InternalTopic, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (InvalidPartitions, ErrorCode.INVALID_PARTITIONS),
    (InvalidConfig, ErrorCode.INVALID_CONFIG),
    (OutOfOrderSequence, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (ProducerFenced, ErrorCode.INVALID_PRODUCER_EPOCH),
    (StorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    (StoreClosed, ErrorCode.UNKNOWN_SERVER_ERROR),
)


def error_code(exc: BaseException) -> int:
    """The Kafka error code for a domain error (UNKNOWN_SERVER_ERROR for anything else)."""
    if isinstance(exc, GroupError | TransactionError) and exc.kafka_code >= 0:
        return exc.kafka_code
    for cls, code in _BY_TYPE:
        if isinstance(exc, cls):
            return int(code)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)


def domain_error_code(exc: BaseException) -> int:
    """`error_code` for expected domain errors; anything else is logged before mapping."""
    code = error_code(exc)
    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
        log.error("unexpected error answering a request", exc_info=exc)
    return code


NO_TOPIC_ID = uuid.UUID(int=0)  # the wire's "no id" (a v10+ Metadata topic asked by name)


def topic_uuid(ctx: BrokerContext, name: str) -> uuid.UUID:
    """The id of topic `name` as the wire carries it; the all-zero id when there is none."""
    try:
        return uuid.UUID(hex=ctx.store.topic_id(name))
    except UnknownTopic:
        return NO_TOPIC_ID


def topic_for_id(ctx: BrokerContext, topic_id: uuid.UUID | None) -> str:
    """The name of the topic a request names by id (KIP-516); UnknownTopicId if none has it."""
    if topic_id is None or topic_id == NO_TOPIC_ID:
        raise UnknownTopicId(str(topic_id or NO_TOPIC_ID))
    return ctx.store.topic_name(topic_id.hex)


class Deferred:
    """What a pipelined handler returns when its ordered part could not run at once (a Produce
    that auto-creates a topic off the loop first): the connection starts its next request only
    once `ordered` is done; `answer` is the response, as a pipelined handler's awaitable."""

    def __init__(self, ordered: asyncio.Future, answer: asyncio.Future):
        self.ordered = ordered
        self.answer = answer

    def __await__(self):
        return self.answer.__await__()


class CloseConnection(Exception):
    """Raised by a handler when Kafka's answer is to close the connection (e.g. a failed
    acks=0 produce, which has no response to carry the error)."""


class RecordCheck(Protocol):
    """A check of a produced record set before it is written: the reason it is refused
    (answered as INVALID_RECORD with that message), or None to write it."""

    def __call__(self, topic: str, partition: int, data: bytes) -> str | None: ...


@dataclasses.dataclass
class BrokerContext:
    store: LogStore
    coordinator: GroupCoordinator
    config: ListenerConfig
    transactions: TransactionCoordinator
    notifier: AppendNotifier
    executor: Executor
    cluster_id: str
    host: str = "127.0.0.1"
    port: int = 9092
    auth_executor: Executor | None = None  # SASL checks and role look-ups (see server)
    record_check: RecordCheck | None = None  # e.g. schema validation (confluent.*.validation)
    acls: Any = None  # streams.acl.Acls on a listener with SASL (authz, handlers.acls); else None

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking engine call (fsync, topic creation) on the listener's thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, fn, *args)
