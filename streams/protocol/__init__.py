"""Kafka wire protocol for Tidelog: a codec (``codec``, no I/O), an asyncio listener
(``server``), one handler module per API family (``handlers``) and idempotent-producer state
(``producer_state``). ``python -m streams.protocol`` runs a broker with the listener."""

from streams.protocol.server import KafkaListener, ListenerConfig

__all__ = ["KafkaListener", "ListenerConfig"]
