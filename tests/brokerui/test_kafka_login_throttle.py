"""Sign-ins on the Kafka port share the console's login throttle (django-axes): wrong passwords
sent with SASL PLAIN or SCRAM-SHA-256 (confluent-kafka) count as failed logins for that user
name and address, are audited with the address, and once the limit is reached the right
password is refused on the Kafka port and on the console's login page alike."""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import KafkaError

from tests.brokerui.test_kafka_port import ConsoleServer, _first_error, _rdkafka
from tests.tls import self_signed_cert

LIMIT = 10  # settings.AXES_FAILURE_LIMIT


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def server(tmp_path_factory, tls_files):
    cert, key = tls_files
    server = ConsoleServer(
        tmp_path_factory.mktemp("throttle") / "data",
        TIDELOG_KAFKA_SASL="1",
        TIDELOG_KAFKA_TLS_CERT=str(cert),
        TIDELOG_KAFKA_TLS_KEY=str(key),
    ).start()
    yield server
    server.stop()


def _console_login(server, username: str, password: str) -> int:
    """The status of a POST to the console's login page (with its CSRF token)."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    url = f"http://127.0.0.1:{server.http_port}/accounts/login/"
    page = opener.open(url, timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = {"username": username, "password": password, "csrfmiddlewaretoken": token}
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode())
    opener.addheaders = [("Referer", url)]
    try:
        return opener.open(request, timeout=30).status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_wrong_passwords_on_the_kafka_port_lock_the_user_out_there_and_on_the_console(
    server, tls_files
):
    for i in range(LIMIT):
        mechanism = "PLAIN" if i % 2 else "SCRAM-SHA-256"
        wrong = _first_error(_rdkafka(server, tls_files, mechanism, "victor", f"guess-{i}"))
        assert wrong is not None and wrong.code() == KafkaError._AUTHENTICATION, wrong

    for mechanism in ("SCRAM-SHA-256", "PLAIN"):
        right = _first_error(_rdkafka(server, tls_files, mechanism, "victor"))
        assert right is not None, f"{mechanism}: signed in with the right password"
        assert right.code() == KafkaError._AUTHENTICATION
        assert "is locked out after 10 failed sign-ins" in right.str(), right.str()

    # the same throttle: the console's login page refuses victor's right password too
    assert _console_login(server, "victor", "viewer-pass-123") == 429

    entries = server.audit_entries()
    failed = [e for e in entries if e["action"] == "user.login_failed"]
    assert len(failed) == LIMIT  # tries refused while locked out are not counted
    assert all(e["target"] == "user victor" for e in failed)
    assert all(e["after"]["address"] == "127.0.0.1" for e in failed)
    assert all(e["after"]["via"] == "Kafka client rdkafka" for e in failed)
    assert "login failed: user 'victor' from 127.0.0.1 (Kafka client rdkafka), 1 of 10" in (
        server.log()
    )
    assert [e["after"]["failures"] for e in failed] == list(range(1, LIMIT + 1))
    locked = [e for e in entries if e["action"] == "user.locked_out"]
    assert len(locked) == 1 and locked[0]["after"]["address"] == "127.0.0.1"
