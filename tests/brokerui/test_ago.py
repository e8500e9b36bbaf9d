"""How long ago a time was, as the console's pages say it (``tidelog_format._ago``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from brokerui.console.templatetags.tidelog_format import _ago, ago_ms

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("delta_s", "text"),
    [
        (0, "0 s ago"),
        (5.9, "5 s ago"),
        (125, "2 min ago"),
        (7200, "2 h ago"),
        (3 * 86400, "3 d ago"),
        # a moment ahead of this clock (a view's as-of tick within the same millisecond,
        # another host's clock): still "0 s ago", never "in 0 s"
        (-0.004, "0 s ago"),
        (-0.999, "0 s ago"),
        (-1, "in 1 s"),
        (-90, "in 1 min"),
    ],
)
def test_ago_reads_whole_units_and_only_a_second_ahead_is_the_future(delta_s, text):
    assert _ago(NOW - timedelta(seconds=delta_s), NOW) == text


def test_ago_ms_of_a_tick_just_ahead_of_now_says_ago():
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    html = str(ago_ms(now_ms + 5))
    assert html.endswith(" ago</time>") and "UTC" in html
    assert str(ago_ms(None)) == "never"
