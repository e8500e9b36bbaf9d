"""Hot-path instruments: what the engine reports as it works, for whoever measures it.

The engine calls the process-wide `Instruments` (`current()`) at a few points: each Kafka request
answered (its API name and seconds from decoded to written), each partition fsync, each Kafka
connection opened or closed, records and bytes appended by producers and sent to fetchers. By
default nothing listens (`NullInstruments`: a no-op method call, tens of nanoseconds). The web
layer installs its Prometheus implementation (``brokerui.metrics.instruments``) with
`install()`; the engine itself depends on no metrics library and never imports Django.
"""

from __future__ import annotations

import re
from typing import Protocol


class Instruments(Protocol):
    def request(self, api: str, seconds: float) -> None:
        """A Kafka request of API `api` (Kafka's name: "Produce", "Fetch", ...) was answered
        `seconds` after it was decoded (queueing behind earlier requests included)."""

    def fsync(self, seconds: float) -> None:
        """A partition's log segment was synced to disk in `seconds`."""

    def connection(self, delta: int) -> None:
        """A Kafka client connection opened (+1) or closed (-1)."""

    def records_in(self, topic: str, records: int, nbytes: int) -> None:
        """A Kafka client's batch was appended to `topic` (``PartitionLog.append_record_set``:
        the listener's Produce, or the embedded transactional producer)."""

    def records_out(self, topic: str, records: int, nbytes: int) -> None:
        """A fetch answered `records` records (`nbytes` of batches) from `topic`."""


class NullInstruments:
    """Measures nothing (the default)."""

    def request(self, api: str, seconds: float) -> None:
        pass

    def fsync(self, seconds: float) -> None:
        pass

    def connection(self, delta: int) -> None:
        pass

    def records_in(self, topic: str, records: int, nbytes: int) -> None:
        pass

    def records_out(self, topic: str, records: int, nbytes: int) -> None:
        pass


_current: Instruments = NullInstruments()


def current() -> Instruments:
    return _current


def install(instruments: Instruments | None) -> Instruments:
    """Make `instruments` the process's (None: measure nothing again); returns the previous."""
    global _current
    previous, _current = _current, instruments or NullInstruments()
    return previous


def api_name(handler_name: str) -> str:
    """Kafka's request name from a listener handler's: handle_list_offsets -> ListOffsets."""
    words = re.sub(r"^handle_", "", handler_name).split("_")
    return "".join(w.capitalize() for w in words)


__all__ = ["Instruments", "NullInstruments", "api_name", "current", "install"]
