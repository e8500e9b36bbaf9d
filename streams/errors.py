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
