"""Re-send copies a record byte for byte: its key, value and header values (binary ones too:
bytes 00 ff fe used to come back as three U+FFFD) and header names, through the produce form
as a browser submits it (line breaks as CRLF, no line breaks in a one-line input)."""

from __future__ import annotations

import base64
from html.parser import HTMLParser

from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokerui.console.messages.forms import format_header, parse_headers
from streams.log.records import ProducerRecord

names = st.text(max_size=30)
values = st.binary(max_size=300) | st.text(max_size=100).map(str.encode)


# ================================================================================ header lines


@settings(max_examples=500, deadline=None)
@given(headers=st.lists(st.tuples(names, values), max_size=6))
def test_header_lines_read_back_exactly(headers):
    lines = [format_header(n, v) for n, v in headers]
    for line in lines:
        assert len(line.splitlines()) == 1, line  # one line each, whatever the bytes
    # a browser sends a textarea's lines joined by CRLF
    assert parse_headers("\r\n".join(lines)) == tuple(headers)


def test_binary_header_values_are_written_as_base64():
    assert format_header("bin", b"\x00\xff\xfe") == "bin:: AP/+"
    assert parse_headers("bin:: AP/+") == (("bin", b"\x00\xff\xfe"),)
    assert format_header("trace-id", b"4bf92f35") == "trace-id: 4bf92f35"
    assert format_header("a:b", b" padded ") == '"a:b":: IHBhZGRlZCA='
    assert parse_headers('"a:b": x') == (("a:b", b"x"),)


def test_a_bad_base64_header_value_is_a_message():
    from django import forms

    try:
        parse_headers("ok: 1\nbin:: not base64!")
    except forms.ValidationError as e:
        assert "Line 2 (“bin:: not base64!”): the value after “::” is not base64." in e.messages
    else:
        raise AssertionError("accepted")


# ================================================================================ the page


class _Form(HTMLParser):
    """The produce form's fields as a browser would submit them."""

    def __init__(self):
        super().__init__()
        self.fields: dict[str, str] = {}
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.fields[a["name"]] = a.get("value", "on")
            elif kind != "submit":
                # a browser drops line breaks from a one-line input's value
                value = a.get("value") or ""
                self.fields[a["name"]] = value.replace("\r", "").replace("\n", "")
        elif tag == "textarea":
            self._textarea = a["name"]
            self.fields[self._textarea] = ""
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select and "selected" in a:
            self.fields[self._select] = a["value"]

    def handle_endtag(self, tag):
        if tag == "textarea":
            # the parser dropped the newline after <textarea>; a browser sends LF as CRLF
            text = self.fields[self._textarea].removeprefix("\n")
            self.fields[self._textarea] = text.replace("\n", "\r\n")
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data):
        if self._textarea:
            self.fields[self._textarea] += data


def _resend_form(client, topic: str, offset: int) -> dict[str, str]:
    response = client.get(
        reverse("console:produce", args=[topic]),
        {"from_topic": topic, "from_partition": "0", "from_offset": str(offset)},
    )
    assert response.status_code == 200
    parser = _Form()
    parser.feed(response.content.decode())
    return parser.fields


def _resend(client, store, topic: str, offset: int):
    fields = _resend_form(client, topic, offset)
    response = client.post(reverse("console:produce", args=[topic]), fields)
    assert response.status_code == 200, response.content.decode()[-2000:]
    end = store.offsets(topic, 0)[1]
    return store.read(topic, 0, end - 1, max_records=1)[0]


def test_a_binary_header_is_resent_exactly(operator_client, broker):
    """The report: header bytes 00 ff fe came back as three U+FFFD."""
    store = broker.store
    store.create_topic("bin")
    store.append("bin", b'{\n  "a": 1\n}', key=b"k", headers=[("bin", b"\x00\xff\xfe")])

    copy = _resend(operator_client, store, "bin", 0)

    assert copy.headers == (("bin", b"\x00\xff\xfe"),)
    assert (copy.key, copy.value) == (b"k", b'{\n  "a": 1\n}')


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key=st.none() | st.binary(min_size=1, max_size=100) | st.text(min_size=1).map(str.encode),
    value=st.none() | values,
    headers=st.lists(st.tuples(names, values), max_size=4),
)
def test_any_record_is_resent_exactly(operator_client, broker, key, value, headers):
    store = broker.store
    if "any" not in store.list_topics():
        store.create_topic("any")
    (written,) = store.append_batch("any", [ProducerRecord(value, key, tuple(headers))], 0)

    copy = _resend(operator_client, store, "any", written.offset)

    assert copy.offset > written.offset
    assert (copy.key, copy.value, copy.headers) == (key, value, tuple(headers)), base64.b64encode(
        value or b""
    )
