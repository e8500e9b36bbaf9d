"""Topic aggregation jobs: the live numbers behind the console's user-defined panels.

A ``PanelSpec`` says what to compute over one topic's JSON records (an aggregation of a field,
grouped by another, in tumbling/hopping/sliding/session windows). ``PanelJobs`` runs one
``WindowOperator`` per panel over every partition of the topic, read by one daemon thread from
a ``RecordSource`` (the ``LogStore`` itself, or a ``ClusterSource`` over any Cluster, an
external Kafka-protocol cluster included: see ``source``), and hands each poll's new emissions
to subscribers as a ``PanelUpdate``; ``snapshot`` gives a page that opens later the latest
result per window.

Time: with ``time_field`` the job runs in event time (the field holds epoch milliseconds or an
ISO-8601 string), each topic partition is an input partition of the operator, and a partition
that sends nothing for ``IDLE_TIMEOUT_MS`` stops holding the watermark back; if every partition
is quiet the watermark waits for new records, as event time must. Without ``time_field`` the
job uses *processing time as the broker saw it*: each record's log timestamp (its append time),
and once the job has read everything there is, the watermark follows the clock (minus the
out-of-orderness). A backfill then lands in the windows its records were written in instead
of piling into the current one (no fake spike after a restart), and quiet topics still close
their windows on time.

Jobs emit ``current`` results (every update, so a chart moves as records arrive, then one
``final`` emission per window); within one poll only the latest emission per window is kept.
Records that are not JSON, lack a field, or hold a non-number where a number is needed count
as ``parse_errors`` and are skipped. Each correction is kept with the window's values before and
after, and each late event (dropped) with the watermark that made it late: see ``jobs``.
``sample`` checks a spec's field paths against a sample of the topic's records before a panel
is saved.

Thread-safety: every public method may be called from any thread. The set of jobs is guarded
by one lock and each job's state by its own (held while it polls, at most ``READ_BUDGET``
records per partition); subscriber callbacks run on the jobs thread, outside the locks, and
must not block.
"""

from streams.processing.panels.jobs import Correction, PanelJobs, PanelUpdate
from streams.processing.panels.source import ClusterSource, RecordSource
from streams.processing.panels.spec import AGGREGATIONS, WINDOWS, PanelSpec, extract, parse_time

__all__ = [
    "AGGREGATIONS",
    "WINDOWS",
    "ClusterSource",
    "Correction",
    "PanelJobs",
    "PanelSpec",
    "PanelUpdate",
    "RecordSource",
    "extract",
    "parse_time",
]
