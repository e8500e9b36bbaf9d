"""Browser tests: the real server (Daphne, as `make run` starts it) on a free loopback port with a
fresh data directory and demo traffic, Debian's Chromium through Playwright, and an operator
account in that server's database.

What costs seconds and tells a test nothing is done once: the database is migrated and the
operator created (`manage.py migrate`, `manage.py createsuperuser`) once per session into a
template that each test's fresh data directory starts from, and Chromium is launched once for
tests/browser, each test getting its own pages (browser contexts, closed after it)."""

from __future__ import annotations

import os
import shutil
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


def _server_env(data_dir: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "TIDELOG_DATA_DIR": str(data_dir),
        "TIDELOG_DEMO": "1",
        "TIDELOG_DEBUG": "0",
        "DJANGO_SETTINGS_MODULE": "brokerui.settings",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    return env


OPERATOR_PASSWORD = "browser-operator-pass-1"


@pytest.fixture(scope="session")
def data_template(tmp_path_factory) -> Path:
    """A data directory holding only the console's database, migrated, with the operator `ops`
    (superuser, `OPERATOR_PASSWORD`): what `manage.py migrate` and `createsuperuser` make, done
    once; `ServerProcess` copies it into each test's data directory."""
    data_dir = tmp_path_factory.mktemp("browser-template") / "data"
    env = {**_server_env(data_dir), "DJANGO_SUPERUSER_PASSWORD": OPERATOR_PASSWORD}
    manage = [sys.executable, str(REPO_DIR / "manage.py")]
    create_operator = ["createsuperuser", "--noinput", "--username", "ops"]
    for command in (["migrate", "--noinput"], [*create_operator, "--email", "ops@example.com"]):
        subprocess.run(
            [*manage, *command], env=env, cwd=REPO_DIR, check=True, capture_output=True, timeout=120
        )
    return data_dir


class ServerProcess:
    """A Tidelog server on one data directory and port; `stop()` (SIGTERM, which must exit
    cleanly) and `start()` again restart it on the same data, as an operator would. The data
    directory (``tmp_path/data``, which may already hold topics) gets the template's migrated
    database (the `data_template` fixture)."""

    def __init__(self, tmp_path: Path, data_template: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "server.log"
        self.proc: subprocess.Popen | None = None
        self.env = {**_server_env(tmp_path / "data"), "TIDELOG_HTTP_PORT": str(self.port)}
        self.manage = [sys.executable, str(REPO_DIR / "manage.py")]
        shutil.copytree(data_template, tmp_path / "data", dirs_exist_ok=True)

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
def server_process(tmp_path, data_template):
    """The running `ServerProcess` (a test may restart it); stopped at the end."""
    server = ServerProcess(tmp_path, data_template)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(server_process):
    """Base URL of a running Tidelog server; stopped with SIGTERM, which must exit cleanly."""
    return server_process.url


@pytest.fixture(scope="package")
def chromium():
    """Debian's Chromium, launched once for tests/browser (a launch costs seconds)."""
    require_program(CHROMIUM)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser(chromium):
    """The Chromium browser for one test: its pages (`new_page`, `new_context`) are its own
    browser contexts (cookies, storage, cache apart from every other test's) and are closed
    after it, so nothing of one test reaches the next."""
    assert not chromium.contexts, "a previous test's pages are still open"
    yield chromium
    for context in chromium.contexts:
        context.close()


@pytest.fixture
def operator_login(server):
    """(base url, user, password) of the operator in the server's database (`data_template`)."""
    return server, "ops", OPERATOR_PASSWORD


#: htmx logs an aborted request as an error: one superseded under ``hx-sync="this:replace"``
#: (a check-as-you-type while one types on) or cut off by leaving the page. That is by design;
#: failed, refused and timed-out requests log their own events (sendError, responseError,
#: timeout), which still count.
_ABORTED = ("htmx:sendAbort", "htmx:afterRequest")


def _console_error(message) -> bool:
    return message.type == "error" and not message.text.startswith(_ABORTED)


def logged_in_page(browser, operator_login, width: int = 1280, height: int = 900):
    """(base url, a page logged in as the operator, the console errors it collects)."""
    base, user, password = operator_login
    page = browser.new_page(viewport={"width": width, "height": height})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if _console_error(m) else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")
    return base, page, problems
