"""A runner's ``JobMetrics``: records in and out, late and dropped counts, watermarks, state
size per store, lag per input partition, checkpoints and record errors with their place."""

from __future__ import annotations

import os

import pytest

from streams.jobs import JSON, Count, Job, Tumbling, field
from streams.jobs.metrics import JobMetrics
from streams.jobs.runner import RecordError, Runner
from tests.jobs.test_runner import read_all, write


def late_job(side_output: bool) -> Job:
    job = Job("metered")
    w = (
        job.stream("events", value=JSON, timestamp=field("ts"))
        .window(Tumbling(10))
        .aggregate(name="w", n=Count())
    )
    w.to("counts")
    if side_output:
        w.late().to("late-events")
    return job


@pytest.mark.parametrize("side_output", [True, False])
def test_a_worker_reports_its_numbers(store, coordinator, side_output):  # noqa: F811
    store.create_topic("events", 2)
    write(store, "events", [("a", {"ts": t}, t) for t in (100, 5, 120, 7, 130)])
    job = late_job(side_output)
    metrics = JobMetrics(job.name, every_ms=0)  # look after every round
    runner = Runner(job, store, coordinator=coordinator, max_records=2, metrics=metrics)
    runner.poll_once()
    first = runner.metrics.snapshot()
    runner.run_until_idle()
    snap = runner.metrics.snapshot()
    assert snap.status == "running" and snap.pid == os.getpid() and snap.host
    owned = {(t, task.partition) for task in snap.tasks for t in task.inputs}
    assert ("events", 0) in owned and ("events", 1) in owned
    assert snap.records_in == 5 and snap.late == 2
    assert snap.dropped == (0 if side_output else 2)
    if side_output:
        assert sorted(v["ts"] for _, v, _ in read_all(store, "late-events")) == [5, 7]
    assert snap.records_out == len(read_all(store, "counts")) + (2 if side_output else 0)
    # the task of the partition without events has no watermark yet
    assert sorted(t.watermarks_ms["w"] or 0 for t in snap.tasks) == [0, 130]
    assert snap.watermark_ms == 130
    assert snap.state_keys["w"] >= 1  # the open window and the operator's progress
    assert snap.lag_records == 0
    assert first.lag_records > 0  # max_records=2: the first round left records unread
    assert snap.checkpoints >= 2 and snap.last_checkpoint_ms is not None
    assert snap.last_checkpoint_duration_ms >= 0
    assert snap.as_of_ms >= first.as_of_ms


def test_a_record_error_is_reported_with_its_topic_partition_and_offset(
    store,  # noqa: F811
    coordinator,  # noqa: F811
):
    store.create_topic("events", 1)
    write(store, "events", [("a", {"ts": 1}, 1)])
    store.append_batch("events", [(b"not json", b"a", (), 2)])
    runner = Runner(late_job(False), store, coordinator=coordinator)
    with pytest.raises(RecordError):
        runner.poll_once()
    (fault,) = runner.metrics.snapshot().errors
    assert (fault.topic, fault.partition, fault.offset) == ("events", 0, 1)
    assert "SerdeError" in fault.error
    assert runner.metrics.snapshot().error_count == 1
