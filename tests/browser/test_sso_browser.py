"""Single sign-on with OpenID Connect, the whole redirect flow in Chromium: a real provider
(django-oauth-toolkit's, tests/oidc_provider, in a process of its own) whose user olga is in
the group team-a; the console binds team-a operator of the topic orders. Olga signs in through
the provider, lands on the console as olga, operator of orders and of nothing else (her groups
came from the provider's groups claim); the local operator still signs in with a password, and a
provider user named like a local user with a password is refused. Screenshots:
tests/browser/screenshots/sso-*.png."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.browser.conftest import (
    OPERATOR_PASSWORD,
    SCREENSHOTS,
    ServerProcess,
    _free_port,
    _wait_until_serving,
)

REPO_DIR = Path(__file__).resolve().parents[2]
CLIENT_ID = "tidelog-console"
CLIENT_SECRET = "console-secret-0123456789"
SETUP = """
from django.contrib.auth.models import Group, User
from oauth2_provider.models import Application
olga = User.objects.create_user("olga", email="olga@example.com", password="olga-pass-123")
olga.groups.add(Group.objects.create(name="team-a"))
User.objects.create_user("ops", email="evil@example.com", password="evil-pass-123")
Application.objects.create(
    name="Tidelog", client_id={client_id!r}, client_secret={secret!r}, hash_client_secret=True,
    client_type="confidential", authorization_grant_type="authorization-code",
    redirect_uris={redirect!r}, algorithm="RS256", skip_authorization=True,
)
"""
BIND = """
from brokerui.access.models import RoleBinding
RoleBinding.objects.create(subject_type="group", subject="team-a", role="operator",
                           kind="topic", pattern="orders")
"""


class Provider:
    """django-oauth-toolkit's OpenID Connect provider on a loopback port."""

    def __init__(self, tmp_path: Path, redirect_uri: str):
        self.port = _free_port()
        self.issuer = f"http://127.0.0.1:{self.port}/o"
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key_path = tmp_path / "provider-key.pem"
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
            "OIDC_PROVIDER_DB": str(tmp_path / "provider.sqlite3"),
            "OIDC_PROVIDER_KEY": str(key_path),
            "PYTHONUNBUFFERED": "1",
        }
        self.log_path = tmp_path / "provider.log"
        self.admin = [sys.executable, "-m", "django"]
        self._run("migrate", "--noinput")
        code = SETUP.format(client_id=CLIENT_ID, secret=CLIENT_SECRET, redirect=redirect_uri)
        self._run("shell", "-c", code)
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [*self.admin, "runserver", "--noreload", f"127.0.0.1:{self.port}"],
                env=self.env,
                cwd=REPO_DIR,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        _wait_until_serving(
            self.issuer + "/.well-known/openid-configuration", self.proc, self.log_path
        )

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self.admin, *args], env=self.env, cwd=REPO_DIR, check=True, capture_output=True,
            timeout=120,
        )  # fmt: skip

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def sso(tmp_path, data_template):
    console = ServerProcess(tmp_path, data_template)
    provider = Provider(tmp_path, console.url + "/accounts/oidc/callback/")
    console.env.update(
        TIDELOG_OIDC_ISSUER=provider.issuer,
        TIDELOG_OIDC_NAME="Example ID",
        TIDELOG_OIDC_CLIENT_ID=CLIENT_ID,
        TIDELOG_OIDC_CLIENT_SECRET=CLIENT_SECRET,
    )
    subprocess.run(
        [*console.manage, "shell", "--no-imports", "-c", BIND], env=console.env, cwd=REPO_DIR,
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    console.start()
    try:
        yield console, provider
    finally:
        console.stop()
        provider.stop()


def _sign_in_with_provider(page, base: str, user: str, password: str) -> None:
    page.goto(base + "/topics/")
    page.click("#sso-button")
    page.wait_for_selector("#idp-user")
    assert page.url.startswith("http://127.0.0.1:") and "/accounts/login/" in page.url
    page.fill("#idp-user", user)
    page.fill("#idp-password", password)
    page.click("#idp-submit")


def test_sign_in_through_the_provider_maps_its_groups_to_bindings(browser, sso):
    console, provider = sso
    base = console.url
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(base + "/topics/")
    assert "/accounts/login/" in page.url
    assert page.inner_text("#sso-button") == "Sign in with Example ID"
    page.screenshot(path=str(SCREENSHOTS / "sso-login.png"), full_page=True)

    _sign_in_with_provider(page, base, "olga", "olga-pass-123")
    page.wait_for_url(base + "/topics/")
    header = page.inner_text(".account-link")
    assert header == "olga · operator (scoped)"
    rows = page.locator("table tbody tr").all_inner_texts()
    assert len(rows) == 1 and rows[0].startswith("orders"), rows
    page.screenshot(path=str(SCREENSHOTS / "sso-signed-in.png"), full_page=True)

    page.goto(base + "/topics/orders/")
    assert page.locator("text=Edit config").count() == 1  # operator of orders
    refused = page.goto(base + "/topics/payments/")
    assert refused.status == 403
    page.goto(base + "/access/")
    assert "team-a" in page.inner_text("#bindings")
    page.screenshot(path=str(SCREENSHOTS / "sso-access.png"), full_page=True)
    page.context.close()

    # the provider's "ops" cannot take over the local operator "ops", who has a password
    page = browser.new_page()
    _sign_in_with_provider(page, base, "ops", "evil-pass-123")
    page.wait_for_selector("#sso-failed")
    assert "/accounts/login/" in page.url
    assert "OIDC sign-in as 'ops' refused" in console.log_path.read_text()
    page.fill("input[name=username]", "ops")  # local users stay
    page.fill("input[name=password]", OPERATOR_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector(".account-link")
    assert page.inner_text(".account-link") == "ops · operator"
