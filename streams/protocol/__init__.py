"""Kafka wire protocol for Tidelog: a codec (``codec``, no I/O), an asyncio listener
(``server``) and one handler module per API family (``handlers``); produce goes through the
log's entry point (``streams.log.produce``) and transactions through ``streams.txn``.
``python -m streams.protocol`` runs a broker with the listener."""

from streams.protocol.server import KafkaListener, ListenerConfig

__all__ = ["KafkaListener", "ListenerConfig"]
