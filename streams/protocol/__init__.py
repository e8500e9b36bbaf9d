"""Kafka wire protocol for Tidelog: a codec (``codec``, no I/O), an asyncio listener
(``server``) and one handler module per API family (``handlers``). It uses the log only through
its public facade (``LogStore`` and what ``streams.log`` exports; tests/protocol/test_layering.py
checks the imports): produce goes through ``LogStore.produce``, the one path every append takes,
and transactions through ``streams.txn``.
``python -m streams.protocol`` runs a broker with the listener."""

from streams.protocol.server import KafkaListener, ListenerConfig

__all__ = ["KafkaListener", "ListenerConfig"]
