"""``EmbeddedJobs``: jobs run on threads inside the broker's process, started and stopped by
name; a job whose record fails stops as "failed" with the record's place."""

from __future__ import annotations

import threading
import time

import pytest

from streams.errors import InvalidConfig, JobStateConflict, UnknownJob
from streams.jobs import JSON, Count, Job, Tumbling, field
from streams.jobs.embedded import EmbeddedJobs, JobSpec
from tests.jobs.test_runner import read_all, write


def counting() -> Job:
    job = Job("counting")
    (
        job.stream("events", value=JSON, timestamp=field("ts"))
        .window(Tumbling(10))
        .aggregate(name="w", n=Count())
        .to("counts")
    )
    return job


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


@pytest.fixture
def jobs(store, coordinator):  # noqa: F811
    jobs = EmbeddedJobs(store, coordinator, round_interval_s=0.01, metrics_every_ms=0)
    jobs.register(JobSpec("counting", counting, "counts events per 10 ms"))
    yield jobs
    jobs.close()


def test_start_runs_the_job_and_stop_commits_it(jobs, store, coordinator):  # noqa: F811
    store.create_topic("events", 1)
    assert jobs.status("counting").state == "stopped"
    assert jobs.status("counting").worker is None
    write(store, "events", [("a", {"ts": t}, t) for t in (1, 2, 15)])
    status = jobs.start("counting")
    assert status.inputs == ["events"] and status.outputs == ["counts"]
    assert status.late_outputs == []
    with pytest.raises(JobStateConflict):
        jobs.start("counting")
    wait_for(lambda: jobs.status("counting").worker.records_in == 3)
    wait_for(lambda: len(read_all(store, "counts")) == 1)
    stopped = jobs.stop("counting")
    assert stopped.state == "stopped"
    assert stopped.worker.records_in == 3  # the last numbers stay visible
    assert coordinator.committed("counting")[("events", 0)].offset == 3
    assert not [t for t in threading.enumerate() if t.name == "tidelog-job-counting"]
    with pytest.raises(JobStateConflict):
        jobs.stop("counting")
    jobs.start("counting")  # again: from the committed offsets, state from the changelog
    write(store, "events", [("a", {"ts": 30}, 30)])
    wait_for(lambda: len(read_all(store, "counts")) == 2)  # the window of 15 closed
    assert [v["n"] for _, v, _ in read_all(store, "counts")] == [2, 1]


def test_unknown_jobs_and_bad_inputs_are_refused(jobs):
    with pytest.raises(UnknownJob):
        jobs.start("nope")
    with pytest.raises(UnknownJob):
        jobs.stop("nope")
    with pytest.raises(InvalidConfig, match="does not exist"):
        jobs.start("counting")  # its input topic is missing: nothing runs
    assert jobs.status("counting").state == "stopped"


def test_a_failing_record_stops_the_job_as_failed(jobs, store):  # noqa: F811
    store.create_topic("events", 1)
    write(store, "events", [("a", {"ts": 1}, 1)])
    store.append_batch("events", [(b"{broken", b"a", (), 2)])
    jobs.start("counting")
    wait_for(lambda: jobs.status("counting").state == "failed")
    status = jobs.status("counting")
    assert "events-0 offset 1" in status.failure
    (fault,) = status.worker.errors
    assert (fault.topic, fault.partition, fault.offset) == ("events", 0, 1)


def test_an_idle_job_runs_no_rounds_and_writes_nothing(jobs, store, coordinator):  # noqa: F811
    """No input to read: no round, so no offset commits or changelog records (each round
    checkpoints), while the job's numbers keep being refreshed."""
    store.create_topic("events", 1)
    write(store, "events", [("a", {"ts": 1}, 1)])
    jobs.start("counting")
    wait_for(lambda: jobs.status("counting").worker.records_in == 1)
    wait_for(lambda: jobs.status("counting").worker.checkpoints >= 1)
    checkpoints = jobs.status("counting").worker.checkpoints

    def ends():
        topics = ("__consumer_offsets", "counting-w-changelog")
        return {
            (t, p): store.offsets(t, p)[1] for t in topics for p in range(store.partition_count(t))
        }

    before = ends()
    as_of = jobs.status("counting").worker.as_of_ms
    wait_for(lambda: jobs.status("counting").worker.as_of_ms > as_of)  # it looked again
    assert jobs.status("counting").worker.checkpoints == checkpoints
    assert ends() == before


def test_a_topic_written_by_several_sinks_is_listed_once(store, coordinator):  # noqa: F811
    def merged() -> Job:  # three streams into one topic, as the demo's session-activity
        job = Job("merged")
        for topic in ("a", "b", "c"):
            job.stream(topic, value=JSON).to("all")
        job.stream("a", value=JSON).filter(lambda v: False).to("none")
        return job

    for topic in ("a", "b", "c"):
        store.create_topic(topic, 1)
    jobs = EmbeddedJobs(store, coordinator, round_interval_s=0.01, metrics_every_ms=0)
    try:
        jobs.register(JobSpec("merged", merged, "three inputs, one output"))
        status = jobs.status("merged")
        assert status.inputs == ["a", "b", "c"]
        assert status.outputs == ["all", "none"]
    finally:
        jobs.close()


def test_a_running_job_is_its_groups_member_so_a_reset_waits_for_stop(jobs, store, coordinator):  # noqa: F811
    """As a Kafka Streams application's instances are members of its group, a running
    embedded job is the one member of the group named after it: the console shows it, and an
    offset reset is refused while the job runs (Kafka's rule), instead of being accepted and
    then overwritten by the job's next commit. Stop, reset, start: the job replays."""
    from streams.errors import GroupNotEmpty
    from streams.groups import ResetScope, ResetStrategy, execute_plan, plan_reset

    store.create_topic("events", 1)
    write(store, "events", [("a", {"ts": t}, t) for t in (1, 2, 15)])
    jobs.start("counting")
    group = coordinator.describe_group("counting")
    assert group.state == "Stable"
    assert [(m.client_id, m.assignment) for m in group.members] == [
        ("tidelog-job-counting", {"events": [0]})
    ]
    wait_for(lambda: coordinator.committed("counting").get(("events", 0)) is not None)
    wait_for(lambda: coordinator.committed("counting")[("events", 0)].offset == 3)
    plan = plan_reset(
        coordinator, store, "counting", ResetStrategy("to-earliest"), ResetScope(all_topics=True)
    )
    with pytest.raises(GroupNotEmpty):
        execute_plan(coordinator, plan)
    jobs.stop("counting")
    assert coordinator.describe_group("counting").state == "Empty"  # it left: no session wait
    plan = plan_reset(
        coordinator, store, "counting", ResetStrategy("to-earliest"), ResetScope(all_topics=True)
    )
    execute_plan(coordinator, plan)
    assert coordinator.committed("counting")[("events", 0)].offset == 0
    jobs.start("counting")  # reads from the reset offsets again: its window of 1-2 again
    wait_for(lambda: jobs.status("counting").worker.records_in == 3)
    wait_for(lambda: coordinator.committed("counting")[("events", 0)].offset == 3)


def test_a_failed_job_leaves_its_group_at_once(jobs, store, coordinator):  # noqa: F811
    """A job stopped by a failing record leaves its group (no checkpoint): it can be reset
    and started again at once, without waiting for its session to time out."""
    store.create_topic("events", 1)
    write(store, "events", [("a", {"ts": 1}, 1)])
    store.append_batch("events", [(b"not json", b"a", (), 2)])
    jobs.start("counting")
    wait_for(lambda: jobs.status("counting").state == "failed")
    wait_for(lambda: coordinator.describe_group("counting").state == "Empty")
    assert coordinator.describe_group("counting").members == ()


def test_an_idle_job_takes_part_in_a_rebalance(store):  # noqa: F811
    """With nothing to read a job runs no round, but its thread still polls once per idle
    wait: when another member joins its group (another worker of the job, say), the job
    rejoins within the rebalance timeout and the group ends Stable with both, not with the
    job removed for missing the rebalance. (The coordinator's timers run here.)"""
    from streams.client import Consumer
    from streams.groups import GroupCoordinator

    store.create_topic("events", 2)
    coordinator = GroupCoordinator(store).start()
    # heartbeats (which carry the news of a rebalance) every 100 ms; 3 s to rejoin
    options = {
        "session_timeout_ms": 10_000,
        "heartbeat_interval_ms": 100,
        "rebalance_timeout_ms": 3_000,
    }
    jobs = EmbeddedJobs(
        store, coordinator, round_interval_s=0.05, metrics_every_ms=0, group_options=options
    )
    other = Consumer(store, coordinator, "counting", client_id="another-worker", **options)
    stop = threading.Event()

    def other_worker() -> None:  # polls as a worker does, till the test ends
        while not stop.is_set():
            other.poll(100)

    polling = threading.Thread(target=other_worker)
    try:
        jobs.register(JobSpec("counting", counting, "counts events per 10 ms"))
        jobs.start("counting")
        before = coordinator.describe_group("counting")
        assert before.state == "Stable" and len(before.members) == 1
        other.subscribe(["events"])
        polling.start()

        def both_stable() -> bool:  # without the job's rejoin: Stable with another-worker only
            g = coordinator.describe_group("counting")
            return g.state == "Stable" and len(g.members) == 2

        wait_for(both_stable)
        after = coordinator.describe_group("counting")
        assert after.generation > before.generation
        assert sorted(m.client_id for m in after.members) == [
            "another-worker",
            "tidelog-job-counting",
        ]
        mine = next(m for m in after.members if m.client_id == "tidelog-job-counting")
        (owned,) = mine.assignment["events"]  # range: one partition each
        wait_for(lambda: jobs.status("counting").worker.partitions == [("events", owned)])
    finally:
        stop.set()
        if polling.is_alive():
            polling.join(10)
        other.close(autocommit=False)
        jobs.close()
        coordinator.close()
