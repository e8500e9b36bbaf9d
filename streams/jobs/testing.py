"""``TestDriver``: run a job in memory, one task, no broker (Kafka Streams' TopologyTestDriver).

::

    driver = TestDriver(job)
    driver.pipe("orders", "o1", {"amount": 5, "ts": 1_000})
    driver.flush()                      # end of input: windows close, left joins emit
    driver.output("revenue-by-country") # [(key, value, ts), ...]

Records go through the job's serialisers both ways, so a value that cannot be written or read
fails here as it would on a broker. Repartition topics loop back at once (one task holds
every key). Stores are in memory, without changelogs.

Thread-safety: none; for tests.
"""

from __future__ import annotations

from streams.jobs.job import Job
from streams.jobs.state import Store, _tupled
from streams.jobs.task import Task


class TestDriver:
    __test__ = False

    def __init__(self, job: Job):
        self.job = job
        self.outputs: dict[str, list[tuple[object, object, int]]] = {}
        self._sources = {n.params["topic"]: n for n in job.sources()}
        self._sinks = {n.params["topic"]: n for n in job.nodes if n.kind == "sink"}
        self.task = Task(job, 0, self._emit, lambda name: Store(name))

    def pipe(self, topic: str, key: object, value: object, ts: int | None = None) -> None:
        """One input record (given as objects; written and read with the source's serdes).
        Without `ts`, the source's timestamp extractor must find it in the value."""
        node = self._sources[topic]
        k = node.params["key"].deserialize(node.params["key"].serialize(key))
        v = node.params["value"].deserialize(node.params["value"].serialize(value))
        extract = node.params["timestamp"]
        if extract is not None and v is not None:  # a tombstone's time is the record's
            ts = extract(v)
        if ts is None:
            raise ValueError(f"{topic}: a record needs a timestamp")
        self.task.feed(topic, _tupled(k), v, ts)

    def flush(self) -> None:
        self.task.flush()

    def output(self, topic: str) -> list[tuple[object, object, int]]:
        return list(self.outputs.get(topic, []))

    def _emit(self, kind: str, topic: str, key: object, value: object, ts: int) -> None:
        if kind == "repartition":
            src = self._sources[topic].params
            k = src["key"].deserialize(src["key"].serialize(key))
            v = src["value"].deserialize(src["value"].serialize(value))
            self.task.feed(topic, _tupled(k), v, ts)
            return
        sink = self._sinks[topic].params
        k = sink["key"].deserialize(sink["key"].serialize(key))
        v = sink["value"].deserialize(sink["value"].serialize(value))
        self.outputs.setdefault(topic, []).append((k, v, ts))
