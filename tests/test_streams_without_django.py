"""Requirement: `streams` imports and works with Django absent.

A child interpreter installs an import hook that refuses `django` and everything under it, then
imports the engine and runs an append/read round trip through the broker runtime.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class RefuseDjango(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "django" or name.startswith("django."):
                raise ImportError(f"django is blocked in this test (import of {name!r})")
            return None

    sys.meta_path.insert(0, RefuseDjango())
    try:
        import django  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("the import hook did not block django")

    import streams
    import streams.errors
    import streams.log
    import streams.broker.runtime
    from streams.broker.runtime import Broker

    with Broker.open(sys.argv[1], demo=False) as broker:
        store = broker.store
        store.create_topic("no-django", partitions=2)
        first = store.append("no-django", b"hello", key=b"k", partition=1)
        second = store.append("no-django", b"world", key=b"k", partition=1)
        records = store.read("no-django", 1, first.offset)
        assert [r.value for r in records] == [b"hello", b"world"], records
        assert [r.offset for r in records] == [first.offset, second.offset], records
        assert records[0].key == b"k", records

    loaded = sorted(m for m in sys.modules if m == "django" or m.startswith("django."))
    assert not loaded, loaded
    print("ROUND TRIP OK")
    """
)


def test_streams_runs_with_django_import_blocked(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "data")],
        cwd=REPO_DIR,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_DIR)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ROUND TRIP OK" in result.stdout
