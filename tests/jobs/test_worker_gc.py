"""A job worker (``python -m streams.jobs run``) settles Python's cycle collector before its
first record (streams.jobs.worker.settle_gc): what was alive at start frozen, the young
generation's threshold raised. Checked in a worker process of its own, stopped where its
runner would start (no cluster needed)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streams.jobs.worker import YOUNG_GC_THRESHOLD, gc_deferred

REPO = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    """
    import gc, sys
    from streams.jobs import __main__ as cli, runner

    def start(self):  # where the worker would begin reading: report the collector, stop
        print(gc.get_threshold()[0], gc.get_freeze_count(), gc.isenabled())
        raise SystemExit(0)

    runner.Runner.start = start
    cli.main(["run", "tests.jobs.workload:windowed", "--bootstrap", "127.0.0.1:1"])
    """
)


def test_the_worker_settles_the_cycle_collector_before_its_first_record():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-2000:]
    threshold, frozen, enabled = done.stdout.split()
    assert int(threshold) == YOUNG_GC_THRESHOLD
    assert int(frozen) > 1000  # the modules, the job and its clients
    assert enabled == "True"  # cycles are still collected


def test_a_batch_defers_the_collector_and_turns_it_back_on():
    """``gc_deferred`` (a join's batch): off inside, on after, also after an error; a
    collector the host turned off stays off."""
    assert gc.isenabled()
    with gc_deferred():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), gc_deferred():
        1 / 0  # noqa: B018
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_deferred():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
