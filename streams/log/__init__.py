"""The partitioned log store (Kafka's storage model, on Kafka's record batch v2 format).

Entry point: ``LogStore.open(path)``. See ``store`` for the data directory layout, ``partition``
for offsets, durability and concurrency, ``segment``/``index`` for the files and ``records`` for
the byte format.
"""

from streams.log.config import TopicConfig, validate_topic_name
from streams.log.records import ProducerRecord, Record
from streams.log.store import (
    AppendResult,
    LogStore,
    PartitionDescription,
    TopicDescription,
)

__all__ = [
    "AppendResult",
    "LogStore",
    "PartitionDescription",
    "ProducerRecord",
    "Record",
    "TopicConfig",
    "TopicDescription",
    "validate_topic_name",
]
