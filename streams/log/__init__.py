"""The partitioned log store (Kafka's storage model, on Kafka's record batch v2 format).

Entry point: ``LogStore.open(path)``. See ``store`` for the data directory layout, ``partition``
for offsets, durability and concurrency, ``produce`` and ``producer_state`` for the one path
every append takes, ``segment``/``index`` for the files and ``records`` for the byte format.

What this package exports is its public facade: layers above it (the Kafka listener in
``streams.protocol`` among them, checked by tests/protocol/test_layering.py) import nothing
else from ``streams.log``.
"""

from streams.log.config import KAFKA_FLUSH_DEFAULTS, TopicConfig, validate_topic_name
from streams.log.config import SCHEMA as TOPIC_CONFIG_SCHEMA
from streams.log.keyed import KeyedLog, StoreKeyedLog
from streams.log.produce import Appended
from streams.log.producer_state import ProducerDescription
from streams.log.records import ProducerRecord, Record
from streams.log.store import (
    MAX_PARTITIONS,
    AppendResult,
    FetchedData,
    LogStore,
    PartitionDescription,
    TopicDescription,
    is_internal,
)

__all__ = [
    "KAFKA_FLUSH_DEFAULTS",
    "MAX_PARTITIONS",
    "TOPIC_CONFIG_SCHEMA",
    "AppendResult",
    "Appended",
    "FetchedData",
    "KeyedLog",
    "LogStore",
    "PartitionDescription",
    "ProducerDescription",
    "ProducerRecord",
    "Record",
    "StoreKeyedLog",
    "TopicConfig",
    "TopicDescription",
    "is_internal",
    "validate_topic_name",
]
