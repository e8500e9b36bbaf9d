"""Runs the benchmarks: `python -m tests.bench [NAME ...]` (what `make bench` calls).

Each benchmark is a module `tests/bench/bench_<name>.py` with a `main()` that measures Tidelog
and its peer in the same run, prints a table and writes bench-results/<name>.json. With no
names, every benchmark runs in name order; the BENCH environment variable is read as well.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in BENCH_DIR.glob("bench_*.py"))


def selected(argv: list[str], environ: dict[str, str]) -> list[str]:
    names = argv or environ.get("BENCH", "").replace(",", " ").split()
    known = available()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {', '.join(unknown)}; available: {known}")
    return names or known


def main(argv: list[str] | None = None) -> int:
    names = selected(sys.argv[1:] if argv is None else argv, dict(os.environ))
    if not names:
        print("no benchmarks in tests/bench/ (files named bench_<name>.py with a main())")
        return 0
    for name in names:
        print(f"== bench {name} ==", flush=True)
        started = time.monotonic()
        module = importlib.import_module(f"tests.bench.bench_{name}")
        module.main()
        print(f"== bench {name}: done in {time.monotonic() - started:.1f} s ==", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
