"""Kafka transactions (KIP-98): the transaction coordinator (``coordinator``). The per-partition
side — open transactions, last stable offset, aborted index, markers — is the log's
(``streams.log.txn``)."""

from streams.txn.coordinator import (
    TXN_STATE_TOPIC,
    TransactionCoordinator,
    TransactionDescription,
    TxnState,
)

__all__ = ["TXN_STATE_TOPIC", "TransactionCoordinator", "TransactionDescription", "TxnState"]
