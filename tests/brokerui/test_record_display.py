"""Any bytes in a record's key, value and headers render on every page that shows records (the
message browser, the record page and its "show all", the JSON API): property tests over arbitrary
bytes at the level of the display functions and of the pages, and the record that made the
pages fail, a JSON value holding a lone surrogate escape, produced with kcat."""

from __future__ import annotations

import base64
import json
import re
import subprocess

import pytest
from django.urls import reverse
from django.utils.safestring import SafeData
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokerui.console.messages import display
from streams.log.records import ProducerRecord
from tests.system_programs import require_program

LONE_SURROGATE_JSON = b'{"a":"\\ud800"}'
# characters a page must never carry: lone surrogates cannot be encoded at all, C0 controls
# (but tab, LF, CR) and DEL are not allowed in HTML text
_UNPRINTABLE = re.compile("[\ud800-\udfff\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _json_with_odd_strings():
    """JSON documents (as bytes) whose strings hold any code point, lone surrogates included,
    written the way a JSON encoder writes them (``\\uXXXX`` escapes) or raw."""
    scalar = st.one_of(
        st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None)),
        st.integers(0xD800, 0xDFFF).map(chr),
        st.integers(),
        st.none(),
        st.booleans(),
    )
    doc = st.recursive(
        scalar,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )
    return st.builds(
        lambda d, ascii_: json.dumps(d, ensure_ascii=ascii_).encode("utf-8", "surrogatepass"),
        st.dictionaries(st.text(), doc, min_size=1, max_size=3) | st.lists(doc, min_size=1),
        st.booleans(),
    )


record_bytes = st.one_of(
    st.binary(max_size=600),
    st.binary(min_size=4000, max_size=9000),  # past the binary sniffing window
    st.text().map(str.encode),
    _json_with_odd_strings(),
    st.just(LONE_SURROGATE_JSON),
)
headers = st.lists(st.tuples(st.text(max_size=20), st.one_of(st.none(), record_bytes)), max_size=4)


def _unhex(dump: str) -> bytes:
    """The bytes of `display.hex_dump` output."""
    out = bytearray()
    for line in dump.splitlines():
        out += bytes.fromhex(line[10:58])
    return bytes(out)


def _check_shown(shown: display.Shown, data: bytes | None, *, short: bool = False) -> None:
    assert isinstance(shown.text, str) and not isinstance(shown.text, SafeData)
    shown.text.encode("utf-8")  # a page can carry it
    assert not _UNPRINTABLE.search(shown.text), shown
    if data is None:
        assert shown.kind == "null"
        return
    assert shown.size == len(data)
    if shown.kind == "hex" and not shown.truncated:  # the exact bytes
        assert (bytes.fromhex(shown.text) if short else _unhex(shown.text)) == data


# ================================================================================ display


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.none(), record_bytes), mode=st.sampled_from(display.MODES))
def test_any_bytes_render_as_text_json_or_hex(data, mode):
    for limit in (display.TRUNCATE_CHARS, None):
        _check_shown(display.show_value(data, mode, limit=limit), data)
    _check_shown(display.show_short(data, mode), data, short=True)


@settings(max_examples=100, deadline=None)
@given(hs=headers, mode=st.sampled_from(display.MODES))
def test_any_headers_render(hs, mode):
    for short in (True, False):
        shown = display.show_headers(hs, mode, short=short)
        assert len(shown) == len(hs)
        for (name, value), (_, data) in zip(shown, hs, strict=True):
            name.encode("utf-8")
            assert not _UNPRINTABLE.search(name)
            _check_shown(value, data, short=short)


def test_a_lone_surrogate_in_json_is_shown_as_its_escape():
    shown = display.show_value(LONE_SURROGATE_JSON)
    assert shown.kind == "json"
    assert shown.text == '{\n  "a": "\\ud800"\n}'


def test_control_characters_are_shown_as_pictures_in_text_mode():
    assert display.show_value(b"a\x00b\x1b\x7f\tc\n", "text").text == "a\u2400b\u241b\u2421\tc\n"
    assert display.show_short(b"\x00", "text").text == "\u2400"


def test_json_nested_deeper_than_python_recurses_is_text():
    deep = b"[" * 100_000 + b"]" * 100_000
    assert display.show_value(deep).kind == "text"


# ================================================================================ pages


def _pages(client, topic: str, partition: int, offset: int) -> dict[str, object]:
    """Every page that shows the record at `offset`, each in every display mode."""
    browse = reverse("console:messages", args=[topic])
    record = reverse("console:message", args=[topic, partition, offset])
    out = {}
    for mode in display.MODES:
        out[f"browser {mode}"] = client.get(
            browse,
            {"partition": partition, "seek": "offset", "offset": offset, "size": 1, "view": mode},
        )
        out[f"record {mode}"] = client.get(record, {"view": mode})
        out[f"show all {mode}"] = client.get(record, {"view": mode}, HTTP_HX_REQUEST="true")
    out["browser newest"] = client.get(browse)
    out["api"] = client.get(
        f"/api/v1/topics/{topic}/records", {"partition": partition, "offset": offset, "limit": 1}
    )
    return out


def _assert_rendered(pages, key, value, hs) -> None:
    for name, response in pages.items():
        assert response.status_code == 200, name
    body = pages["api"].json()["records"][0]

    def exact(encoded):
        return None if encoded is None else base64.b64decode(encoded["base64"])

    assert exact(body["key"]) == key
    assert exact(body["value"]) == value
    assert [(h["key"], exact(h["value"])) for h in body["headers"]] == [(k, v) for k, v in hs]


@pytest.fixture
def odd_topic(broker):
    broker.store.create_topic("odd", partitions=1)
    return broker.store


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(key=st.one_of(st.none(), record_bytes), value=st.one_of(st.none(), record_bytes), hs=headers)
def test_pages_render_a_topic_holding_any_bytes(viewer_client, odd_topic, key, value, hs):
    (offset,) = [
        r.offset for r in odd_topic.append_batch("odd", [ProducerRecord(value, key, tuple(hs))], 0)
    ]
    _assert_rendered(_pages(viewer_client, "odd", 0, offset), key, value, hs)


def test_a_lone_surrogate_produced_with_kcat_renders_everywhere(settings, tmp_path, viewer):
    """The report: ``{"a":"\\ud800"}`` produced with kcat made the browser and the record page
    of its topic answer 500."""
    from django.test import Client

    from brokerui.broker import close_broker, get_broker

    require_program("kcat")
    close_broker()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    settings.TIDELOG_KAFKA_LISTENER = True
    settings.TIDELOG_KAFKA_PORT = 0
    try:
        host, port = get_broker().kafka_address
        subprocess.run(
            [
                "kcat",
                "-b",
                f"{host}:{port}",
                "-P",
                "-t",
                "surrogates",
                "-K:",
                "-H",
                "trace=\\ud800",
            ],
            input=b'k:{"a":"\\ud800"}\n',
            capture_output=True,
            timeout=60,
            check=True,
        )
        client = Client()
        client.force_login(viewer)
        pages = _pages(client, "surrogates", 0, 0)
        _assert_rendered(pages, b"k", LONE_SURROGATE_JSON, [("trace", b"\\ud800")])
        shown = pages["record auto"].content.decode()
        assert "&quot;a&quot;: &quot;\\ud800&quot;" in shown
    finally:
        close_broker()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_hex_rows_keep_the_dump_and_put_each_column_in_a_span(data):
    """The page's hex dump markup (templatetags hex_rows): its text is the dump, escaped, and
    each line has its offset, two groups of 8 bytes and their ASCII in spans of their own."""
    import html as htmllib

    from brokerui.console.templatetags.tidelog_format import hex_rows

    dump = display.hex_dump(data)
    markup = str(hex_rows(dump))
    assert htmllib.unescape(re.sub(r"</?span[^>]*>", "", markup)) == dump
    assert "<" not in re.sub(r"</?span[^>]*>", "", markup)  # "<" in the ASCII is escaped
    lines = re.findall(r'<span class="hx">(.*?)\n?</span>(?=<span class="hx">|$)', markup, re.S)
    assert len(lines) == len(dump.split("\n")) if data else markup == ""
    chunks = [data[i : i + 16] for i in range(0, len(data), 16)]
    for line, chunk in zip(lines, chunks, strict=True):
        columns = [htmllib.unescape(c) for c in re.findall(r"<span>(.*?)</span>", line)]
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        assert len(columns) == 5 and columns[3] + columns[4] == ascii_
        assert bytes.fromhex(columns[1] + columns[2]) == chunk
