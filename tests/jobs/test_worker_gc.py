"""A job worker (``python -m streams.jobs run``) settles Python's cycle collector before its
first record (streams.jobs.worker.settle_gc): what was alive at start frozen, the young
generation's threshold raised. Checked in a worker process of its own, stopped where its
runner would start (no cluster needed)."""

from __future__ import annotations

import gc
import os
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


SERVER_PROBES = {
    # the standalone listener: stopped where it says it listens (after the broker opened)
    "listener": textwrap.dedent(
        """
        import gc, sys
        from streams.protocol import __main__ as listener

        def said(*args, **kwargs):
            print("gc", gc.get_threshold()[0], gc.get_freeze_count(), gc.isenabled())
            raise SystemExit(0)

        listener.print = said
        listener.main(["--data-dir", sys.argv[1], "--port", "0"])
        """
    ),
    # the console's server: its ASGI entry point loaded, as Daphne loads it
    "console": textwrap.dedent(
        """
        import gc, sys
        import brokerui.asgi
        print("gc", gc.get_threshold()[0], gc.get_freeze_count(), gc.isenabled())
        """
    ),
}


@pytest.mark.parametrize("server", sorted(SERVER_PROBES))
def test_a_server_process_settles_the_cycle_collector(server, tmp_path):
    """The processes where the broker and the embedded jobs run settle the collector as a
    worker does (streams.gcsettings.settle_gc), once they are up."""
    env = {
        **os.environ,
        "TIDELOG_DATA_DIR": str(tmp_path / "data"),
        "TIDELOG_DEMO": "0",
        "TIDELOG_KAFKA_LISTENER": "0",
    }
    done = subprocess.run(
        [sys.executable, "-c", SERVER_PROBES[server], str(tmp_path / "log")],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("gc ")]
    threshold, frozen, enabled = line.split()[1:]
    assert int(threshold) == YOUNG_GC_THRESHOLD
    assert int(frozen) > 1000  # the modules and the server's long-lived objects
    assert enabled == "True"
