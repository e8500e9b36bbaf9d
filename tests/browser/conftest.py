"""Browser tests: the real server (Daphne, as `make run` starts it) on a free loopback port with a
fresh data directory and demo traffic, Debian's Chromium through Playwright, and an operator
account in that server's database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.system_programs import require_program

REPO_DIR = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_serving(url: str, server: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"server exited with {server.returncode}:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"server did not answer on {url} within 60 s:\n{log_path.read_text()}")


class ServerProcess:
    """A Tidelog server on one data directory and port; `stop()` (SIGTERM, which must exit
    cleanly) and `start()` again restart it on the same data, as an operator would."""

    def __init__(self, tmp_path: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "server.log"
        self.proc: subprocess.Popen | None = None
        self.env = {
            **os.environ,
            "TIDELOG_DATA_DIR": str(tmp_path / "data"),
            "TIDELOG_DEMO": "1",
            "TIDELOG_DEBUG": "0",
            "TIDELOG_HTTP_PORT": str(self.port),
            "DJANGO_SETTINGS_MODULE": "brokerui.settings",
            "PYTHONUNBUFFERED": "1",
        }
        self.env.pop("DATABASE_URL", None)
        self.env.pop("REDIS_URL", None)
        self.manage = [sys.executable, str(REPO_DIR / "manage.py")]
        subprocess.run(
            [*self.manage, "migrate", "--noinput"],
            env=self.env,
            cwd=REPO_DIR,
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [*self.manage, "runserver", "--noreload", "--nostatic", f"127.0.0.1:{self.port}"],
                env=self.env,
                cwd=REPO_DIR,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        _wait_until_serving(self.url + "/", self.proc, self.log_path)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"server ignored SIGTERM for 30 s:\n{self.log_path.read_text()}")
        log_text = self.log_path.read_text()
        assert proc.returncode == 0, log_text
        assert "broker on" in log_text and "closed" in log_text, log_text


@pytest.fixture
def server_process(tmp_path):
    """The running `ServerProcess` (a test may restart it); stopped at the end."""
    server = ServerProcess(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(server_process):
    """Base URL of a running Tidelog server; stopped with SIGTERM, which must exit cleanly."""
    return server_process.url


@pytest.fixture
def browser():
    require_program(CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


OPERATOR_PASSWORD = "browser-operator-pass-1"


@pytest.fixture
def operator_login(server, tmp_path):
    """(base url, user, password) of an operator created in the server's database."""
    env = {
        **os.environ,
        "TIDELOG_DATA_DIR": str(tmp_path / "data"),
        "DJANGO_SETTINGS_MODULE": "brokerui.settings",
        "DJANGO_SUPERUSER_PASSWORD": OPERATOR_PASSWORD,
    }
    env.pop("DATABASE_URL", None)
    subprocess.run(
        [
            sys.executable,
            str(REPO_DIR / "manage.py"),
            "createsuperuser",
            "--noinput",
            "--username",
            "ops",
            "--email",
            "ops@example.com",
        ],
        env=env,
        cwd=REPO_DIR,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return server, "ops", OPERATOR_PASSWORD


def logged_in_page(browser, operator_login, width: int = 1280, height: int = 900):
    """(base url, a page logged in as the operator, the console errors it collects)."""
    base, user, password = operator_login
    page = browser.new_page(viewport={"width": width, "height": height})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")
    return base, page, problems
