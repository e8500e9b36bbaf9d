"""Stream jobs: a chained dataflow API with keyed state, changelogs and joins (no Django).

- ``job``: ``Job``, ``Stream``, ``Table`` — the chained API (``stream().filter().map()
  .key_by().window().aggregate().to()``, tumbling/hopping/session windows, running
  aggregates, joins, ``process`` with state, ``repartition``, ``foreach`` into an outside
  store);
- ``serde``: the ``Serde`` Protocol and ``BYTES``/``TEXT``/``JSON``, ``field()``;
- ``aggregates``: ``Count``, ``Sum``, ``Min``, ``Max``, ``Mean`` over value fields, computed by
  ``streams.processing``'s window operator;
- ``cep``: ``Pattern`` (Flink CEP's shape) for ``Stream.match`` (semantics in its docstring);
- ``joins``: ``IntervalJoin``, ``AsOfJoin``, ``TableJoin`` (semantics in their docstrings);
- ``state``: changelogged stores (memory by default, RocksDB via rocksdict as an option);
- ``views``: the tables a running job maintains, queried by key, range and time, and watched
  (``LocalViews``, the ``ViewQuery`` seam; snapshot + change stream);
- ``runner``: ``Runner``, one worker, over a ``logs.JobLog``: the embedded ``LogStore``
  (``logs.EmbeddedLog``; alone, every partition, or with ``group=True`` one of several workers
  sharing the partitions through the job's group) or a Kafka-protocol cluster
  (``kafka.KafkaLog``, at-least-once or exactly-once), checkpointing every N ms;
- ``python -m streams.jobs run MODULE:JOB --bootstrap HOST:PORT``: one worker process over the
  Kafka protocol (``__main__``);
- ``metrics``: ``JobMetrics``, what a worker reports (lag, watermarks, late and dropped counts,
  state size, checkpoints, record errors) for the console's Jobs page;
- ``embedded``: ``EmbeddedJobs``, jobs run on threads in the broker's process (the demo's);
- ``testing``: ``TestDriver`` (in memory, no broker).
"""

from streams.jobs.aggregates import Count, Max, Mean, Min, Sum
from streams.jobs.cep import Pattern
from streams.jobs.job import Job, KeyState, Stream, Table
from streams.jobs.serde import BYTES, JSON, TEXT, Serde, SerdeError, field
from streams.processing.windows import Hopping, Session, Tumbling

json = JSON
text = TEXT
raw = BYTES

__all__ = [
    "BYTES",
    "Count",
    "Hopping",
    "JSON",
    "Job",
    "KeyState",
    "Max",
    "Mean",
    "Min",
    "Serde",
    "Session",
    "Pattern",
    "SerdeError",
    "Stream",
    "Sum",
    "TEXT",
    "Table",
    "Tumbling",
    "field",
    "json",
    "raw",
    "text",
]
