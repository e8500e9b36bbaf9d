"""Programs from Debian packages that some tests need (chromium, redis-server, kcat).

`make test` installs them when run as root, as CI does. On a developer's machine without them
the tests that need one are skipped with the install hint; under CI (``CI`` set to anything but
empty, 0 or false, as `.ci/run` runs) a missing program fails those tests instead, so a broken
install can never pass as a silent skip.
"""

from __future__ import annotations

import os
import shutil

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def require_program(program: str) -> str:
    """The path of `program` (a name on PATH or an absolute path); skips or fails when missing."""
    path = program if os.path.isabs(program) and os.path.exists(program) else None
    path = path or (None if os.path.isabs(program) else shutil.which(program))
    if path:
        return path
    message = f"{program} is missing: `make test` installs it (as root)"
    if under_ci():
        pytest.fail(message)
    pytest.skip(message)
