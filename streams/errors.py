"""Domain errors with stable codes.

The web and wire layers map `code` to an HTTP status or a Kafka error code; the message
is for people.
"""

from __future__ import annotations


class TidelogError(Exception):
    """Base of every error the engine raises on purpose."""

    code = "tidelog_error"


class InvalidTopicName(TidelogError):
    code = "invalid_topic_name"


class UnknownTopic(TidelogError):
    code = "unknown_topic"

    def __init__(self, topic: str):
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


class UnknownTopicId(UnknownTopic):
    """No topic has this id (KIP-516): it never existed, or its topic was deleted (a topic
    re-created under the same name has a new id)."""

    code = "unknown_topic_id"

    def __init__(self, topic_id: str):
        TidelogError.__init__(self, f"no topic has the id {topic_id}")
        self.topic = None
        self.topic_id = topic_id


class UnknownPartition(TidelogError):
    code = "unknown_partition"

    def __init__(self, topic: str, partition: int, count: int):
        super().__init__(
            f"topic {topic!r} has no partition {partition} (it has {count}: 0..{count - 1})"
        )
        self.topic, self.partition, self.count = topic, partition, count


class TopicAlreadyExists(TidelogError):
    code = "topic_already_exists"

    def __init__(self, topic: str):
        super().__init__(f"topic {topic!r} already exists")
        self.topic = topic


class InvalidConfig(TidelogError):
    code = "invalid_config"

    def __init__(self, key: str, value: object, reason: str):
        super().__init__(f"invalid value {value!r} for {key}: {reason}")
        self.key, self.value, self.reason = key, value, reason


class FieldsDoNotFit(InvalidConfig):
    """A panel's field paths do not fit (some of) the sampled records of its topic
    (``streams.processing.panels.sample``); ``problems`` are its ``FieldProblem``s, ``partial``
    says that every field fits some records (saving anyway may make sense)."""

    code = "fields_do_not_fit"

    def __init__(self, problems: list):
        first = problems[0]
        super().__init__(first.field, None, "; ".join(p.reason for p in problems))
        self.problems = list(problems)
        self.partial = not any(p.fatal for p in problems)


class InternalTopic(TidelogError):
    """Internal topics (``__consumer_offsets``, ``__audit``) are written by Tidelog only."""

    code = "internal_topic"

    def __init__(self, topic: str, action: str):
        super().__init__(
            f"{topic!r} is an internal topic, kept by Tidelog itself; it cannot be {action} "
            "from the console, the API or the command line"
        )
        self.topic = topic


class InvalidPartitions(TidelogError):
    code = "invalid_partitions"


class OffsetOutOfRange(TidelogError):
    """The requested offset lies outside [log_start_offset, end_offset]."""

    code = "offset_out_of_range"

    def __init__(self, topic: str, partition: int, offset: int, log_start: int, end: int):
        super().__init__(
            f"offset {offset} is out of range for {topic}-{partition}: "
            f"valid offsets are {log_start}..{end} (log start .. end)"
        )
        self.topic, self.partition, self.offset = topic, partition, offset
        self.log_start_offset, self.end_offset = log_start, end


class CorruptRecord(TidelogError):
    code = "corrupt_record"


class LogDamaged(CorruptRecord):
    """An offset lies in a damaged range of a partition's log (bytes that fail their CRC-32C,
    or are missing): it cannot be served. Kafka's CORRUPT_MESSAGE; `manage.py verify_log
    --repair` cuts the damage out."""

    code = "log_damaged"

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        offset: int,
        first_offset: int | None = None,
        end_offset: int | None = None,
    ):
        super().__init__(message)
        self.topic, self.partition, self.offset = topic, partition, offset
        # the damaged range, [first_offset, end_offset): a reader may step over it
        self.first_offset = offset if first_offset is None else first_offset
        self.end_offset = offset + 1 if end_offset is None else end_offset


class InvalidRecord(TidelogError):
    """A record or batch that is well formed but not acceptable (size, missing key, ...)."""

    code = "invalid_record"


class RecordTooLarge(InvalidRecord):
    code = "record_too_large"


class DataDirLocked(TidelogError):
    code = "data_dir_locked"

    def __init__(self, path: str, pid: int | None):
        holder = f"process {pid}" if pid else "another process"
        super().__init__(
            f"data directory {path} is in use by {holder}; stop it or use another directory"
        )
        self.path, self.pid = path, pid


class StoreClosed(TidelogError):
    code = "store_closed"


class StorageError(TidelogError):
    """The disk refused a write (full, quota, I/O error): nothing was stored and the log is as
    it was before the attempt. Kafka's KAFKA_STORAGE_ERROR; clients retry, and the same
    request succeeds once the disk has room again."""

    code = "storage_error"

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno


# --------------------------------------------------------------------------- consumer groups


class GroupError(TidelogError):
    """A group coordinator refusal; `kafka_code` is the Kafka error code it maps to."""

    code = "group_error"
    kafka_code = -1


class UnknownGroup(GroupError):
    code = "unknown_group"
    kafka_code = 69  # GROUP_ID_NOT_FOUND

    def __init__(self, group: str):
        super().__init__(f"consumer group {group!r} does not exist")
        self.group = group


class UnknownMemberId(GroupError):
    code = "unknown_member_id"
    kafka_code = 25


class IllegalGeneration(GroupError):
    code = "illegal_generation"
    kafka_code = 22


class RebalanceInProgress(GroupError):
    code = "rebalance_in_progress"
    kafka_code = 27


class InconsistentGroupProtocol(GroupError):
    code = "inconsistent_group_protocol"
    kafka_code = 23


class InvalidSessionTimeout(GroupError):
    code = "invalid_session_timeout"
    kafka_code = 26


class GroupNotEmpty(GroupError):
    """The group has active members; offsets can only be reset (or the group deleted) when it
    is Empty, as in Kafka."""

    code = "group_not_empty"
    kafka_code = 68  # NON_EMPTY_GROUP

    def __init__(self, group: str, state: str, members: list[str]):
        names = ", ".join(members) if members else "none"
        super().__init__(
            f"consumer group {group!r} is {state}, not Empty: active members {names}. "
            "Stop its consumers (or wait for their sessions to expire) and try again"
        )
        self.group, self.state, self.members = group, state, members


class OffsetsChanged(GroupError):
    """A reset plan was computed against committed offsets that have changed since."""

    code = "offsets_changed"

    def __init__(self, group: str, changed: list[str]):
        super().__init__(
            f"the committed offsets of group {group!r} changed since the plan was made "
            f"({', '.join(changed)}); nothing was applied: preview the reset again"
        )
        self.group, self.changed = group, changed


class NoOffsetForPartition(GroupError):
    """auto.offset.reset=none and the partition has no committed offset (or it is out of range)."""

    code = "no_offset_for_partition"


class InvalidResetSpec(TidelogError):
    code = "invalid_reset"


# --------------------------------------------------------------------------- Kafka wire protocol


class ProtocolError(TidelogError):
    """A Kafka protocol frame that cannot be decoded: the listener closes that connection."""

    code = "protocol_error"


class ProducerFenced(TidelogError):
    """An idempotent producer's epoch is older than the partition has seen."""

    code = "invalid_producer_epoch"
    kafka_code = 47  # INVALID_PRODUCER_EPOCH


class OutOfOrderSequence(TidelogError):
    """An idempotent producer skipped sequence numbers: a batch in between was lost."""

    code = "out_of_order_sequence"
    kafka_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class TransactionError(TidelogError):
    """A transaction coordinator refusal; `kafka_code` is the Kafka error code it maps to."""

    code = "transaction_error"
    kafka_code = -1


class InvalidTxnState(TransactionError):
    """The request does not fit the transaction's state (e.g. a produce to a partition the
    transaction never added, or a commit of an aborted transaction)."""

    code = "invalid_txn_state"
    kafka_code = 48


class UnknownTransactionalId(TransactionError):
    """No transactional id of that name is known to the transaction coordinator."""

    code = "unknown_transactional_id"
    kafka_code = 105  # TRANSACTIONAL_ID_NOT_FOUND

    def __init__(self, transactional_id: str):
        self.transactional_id = transactional_id
        super().__init__(f"no transactional id {transactional_id!r} is known to the coordinator")


class InvalidProducerIdMapping(TransactionError):
    code = "invalid_producer_id_mapping"
    kafka_code = 49


class InvalidTransactionTimeout(TransactionError):
    code = "invalid_transaction_timeout"
    kafka_code = 50


class ConcurrentTransactions(TransactionError):
    """The previous transaction of this transactional id is still being completed: retry."""

    code = "concurrent_transactions"
    kafka_code = 51


class TransactionalProducerFenced(TransactionError):
    """A newer instance with the same transactional id (a higher epoch) took over, or the
    coordinator aborted the transaction (timeout) and bumped the epoch: this one is a zombie.
    PRODUCER_FENCED on request versions that know it, INVALID_PRODUCER_EPOCH before."""

    code = "producer_fenced"
    kafka_code = 90


# --------------------------------------------------------------------------- external clusters


class ClusterError(TidelogError):
    """An external Kafka cluster refused a request with an error Tidelog has no name for."""

    code = "cluster_error"


class ClusterUnavailable(ClusterError):
    """The external Kafka cluster did not answer (down, unreachable, or too slow)."""

    code = "cluster_unavailable"


class Unsupported(TidelogError):
    """The operation is not available on this cluster (e.g. live metrics or segment sizes on
    an external Kafka cluster, or a request the cluster's version does not implement)."""

    code = "unsupported"


# --------------------------------------------------------------------------- stream processing


class UnknownPanel(TidelogError):
    """No aggregation job runs for this panel id (``streams.processing.panels.PanelJobs``)."""

    code = "unknown_panel"

    def __init__(self, panel_id: str):
        super().__init__(f"no aggregation job for panel {panel_id!r}")
        self.panel_id = panel_id


class UnknownJob(TidelogError):
    """No embedded stream job of this name (``streams.jobs.embedded.EmbeddedJobs``)."""

    code = "unknown_job"

    def __init__(self, job: str):
        super().__init__(f"no embedded job {job!r}")
        self.job = job


class JobStateConflict(TidelogError):
    """Start of a running job, or stop of one that is not running."""

    code = "job_state_conflict"

    def __init__(self, job: str, state: str, message: str):
        super().__init__(message)
        self.job, self.state = job, state


# --------------------------------------------------------------------------- alerts


class InvalidAlertRule(TidelogError):
    """An alert rule that cannot be kept as given (``streams.alerts``); `field` names the
    part that is wrong."""

    code = "invalid_alert_rule"

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class UnknownAlertRule(TidelogError):
    code = "unknown_alert_rule"

    def __init__(self, rule_id: str):
        super().__init__(f"no alert rule {rule_id!r}")
        self.rule_id = rule_id
