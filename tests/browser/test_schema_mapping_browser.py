"""A topic of plain Protobuf (no wire-format header) in Debian's Chromium against a real
server: the operator opens the topic's schema mapping from its page, uploads a descriptor set
made by protoc, first naming a message type it lacks (the form again, saying which it has,
nothing kept), then the right one, and the message browser shows the records decoded and says
with what; without a CSP violation. Screenshots: tests/browser/screenshots/mapping-*.png."""

from __future__ import annotations

import pytest

from streams.log.store import LogStore
from tests.browser.conftest import SCREENSHOTS, ServerProcess, logged_in_page
from tests.protosets import compile_descriptor_set, message_class

pytestmark = pytest.mark.browser
WAIT_MS = 10_000
PROTO = """syntax = "proto3";
package plant;
message Reading { string sensor = 1; double celsius = 2; int64 at_ms = 3; }
"""


@pytest.fixture
def descriptor_file(tmp_path):
    return compile_descriptor_set(tmp_path, {"reading.proto": PROTO}, "reading.proto")


@pytest.fixture
def server_process(tmp_path, data_template, descriptor_file):
    """The conftest's server, on a data directory already holding `readings`: 5 plain
    Protobuf ``plant.Reading`` values."""
    server = ServerProcess(tmp_path, data_template)
    cls = message_class(descriptor_file.read_bytes(), "plant.Reading")
    store = LogStore.open(tmp_path / "data")
    store.create_topic("readings", partitions=1)
    for i in range(5):
        value = cls(sensor=f"s-{i}", celsius=20.5 + i, at_ms=1_700_000_000_000 + i)
        store.append("readings", value.SerializeToString(), partition=0)
    store.close()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"mapping-{name}.png"), full_page=True)


def test_map_a_topic_to_an_uploaded_descriptor_set(operator_login, browser, descriptor_file):
    base, page, problems = logged_in_page(browser, operator_login)
    page.goto(base + "/topics/readings/messages/?seek=oldest")
    assert "24.5" not in page.inner_text("main")  # bytes before the mapping

    page.goto(base + "/topics/readings/")
    page.click("#schema-mapping-link")
    page.wait_for_url(base + "/topics/readings/schema-mapping/")
    assert "are mapped" in page.inner_text("#no-mappings")
    page.select_option("#id_source", "descriptor-set")
    page.set_input_files("#mapping-form input[name=descriptor_set]", str(descriptor_file))
    page.fill("#mapping-form input[name=message]", "plant.Sample")
    page.click("#map-button")
    error = page.locator("#mapping-error")
    error.wait_for(timeout=WAIT_MS)
    assert "no message type 'plant.Sample'" in error.inner_text()
    assert "plant.Reading" in error.inner_text()  # what the set has
    _shot(page, "wrong-message")

    page.select_option("#id_source", "descriptor-set")
    page.set_input_files("#mapping-form input[name=descriptor_set]", str(descriptor_file))
    page.fill("#mapping-form input[name=message]", "plant.Reading")
    page.click("#map-button")
    page.wait_for_url(base + "/topics/readings/schema-mapping/")
    assert "read with descriptor set reading.desc" in page.inner_text(".messages")
    row = page.locator('#mappings tr[data-part="value"]')
    assert "plant.Reading" in row.inner_text() and "ops" in row.inner_text()
    _shot(page, "mapped")

    page.click("a:has-text('Browse messages')")
    page.wait_for_url(base + "/topics/readings/messages/**")
    page.goto(base + "/topics/readings/messages/?seek=oldest")
    main = page.inner_text("main")
    assert '"sensor": "s-4"' in main and '"celsius": 24.5' in main
    assert "Protobuf plant.Reading (mapped, no wire format: descriptor set reading.desc)" in main
    _shot(page, "browse-decoded")

    page.goto(base + "/topics/readings/")
    assert "Schema mapping: value" in page.inner_text("#schema-mapping-link")
    # the refused form is answered 422 (Chromium logs that status); nothing else may be
    assert [p for p in problems if "status of 422" not in p] == []
