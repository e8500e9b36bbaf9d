"""Python clients of the embedded broker: a batching producer and a group consumer."""

from streams.client.consumer import CommitFailed, Consumer, ConsumerRecord
from streams.client.producer import Producer

__all__ = ["CommitFailed", "Consumer", "ConsumerRecord", "Producer"]
