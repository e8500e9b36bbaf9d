"""A damaged partition on the topic page (issue 10, item 5), in Debian's Chromium against a real
server that starts on a data directory with a flipped byte in a segment: the start finds it,
and the page shows the alert and the partition's tag. Screenshot:
tests/browser/screenshots/topics-damaged.png."""

from __future__ import annotations

import os

import pytest

from streams.log import LogStore, ProducerRecord
from tests.browser.conftest import SCREENSHOTS

pytestmark = pytest.mark.browser


@pytest.fixture
def damaged_data(tmp_path):
    """`payments` (3 partitions) with one batch of partition 2 damaged, in the data directory
    the `server` fixture then starts on."""
    with LogStore.open(str(tmp_path / "data"), background=False) as store:
        store.create_topic("payments", 3)
        for i in range(90):
            records = [ProducerRecord(b'{"amount": %d, "n": %d}' % (i * 7, j)) for j in range(4)]
            store.append_batch("payments", records, partition=i % 3)
    segment = tmp_path / "data" / "payments-2" / f"{0:020d}.log"
    data = segment.read_bytes()
    position = 12 + int.from_bytes(data[8:12], "big")  # where the second batch starts
    with open(segment, "r+b") as f:
        f.seek(position + 70)
        byte = f.read(1)[0]
        f.seek(position + 70)
        f.write(bytes([byte ^ 0x40]))
    return tmp_path / "data"


def test_topic_page_shows_the_damaged_partition(damaged_data, operator_login, browser):
    base, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")

    page.goto(base + "/topics/payments/")
    alert = page.locator("#log-damage")
    assert alert.is_visible()
    text = alert.inner_text()
    assert "Damaged log in 1 partition" in text and "Partition 2" in text
    assert "offsets 4..7" in text and "00000000000000000000.log" in text
    assert "manage.py verify_log --topic payments --repair" in text
    row = page.locator('tr[data-partition="2"]')
    assert row.locator(".tag-warn").inner_text() == "damaged"
    assert page.locator('tr[data-partition="0"] .tag-warn').count() == 0
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "topics-damaged.png"), full_page=True)
    assert os.path.getsize(SCREENSHOTS / "topics-damaged.png") > 0
