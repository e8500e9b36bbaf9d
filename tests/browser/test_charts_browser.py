"""Live charts people can read (issue 11 item 4), in Debian's Chromium against a real server with
demo traffic, read from the Plotly figures themselves:

- the 15-minute default draws 10-second windows (not 900 one-second points), and a fresh
  server's few windows fill the x axis instead of its right edge;
- a restart of the server leaves a gap in the 5-minute (1-second) chart, drawn as a gap: a
  null between the windows before and after, not a line bridging them;
- the smoothed line is a 5-window moving average, drawn as a curve;
- the 6-hour and 24-hour ranges ask for their 5- and 15-minute windows.

Screenshots in the light and the dark theme go to /tmp/charts-*.png."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.browser
WAIT_MS = 45_000
FIGURE = "document.querySelector('[data-chart=\"records_in\"]')"


def _login(page, server: str, user: str, password: str) -> None:
    page.goto(server + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(server + "/")


def _figure(page) -> dict:
    """The records-in chart as Plotly holds it: traces (x in ms, y) and the x axis range."""
    return page.evaluate(
        f"""() => {{
            const fig = {FIGURE};
            const ms = x => new Date(x).getTime();
            return {{
                traces: fig.data.map(t => ({{
                    name: t.name, x: t.x.map(ms), y: Array.from(t.y), shape: t.line.shape,
                    connectgaps: t.connectgaps,
                }})),
                range: fig.layout.xaxis.range.map(ms),
            }};
        }}"""
    )


def _total(figure: dict) -> dict:
    (trace,) = [t for t in figure["traces"] if t["name"] == "all topics"]
    return trace


def _wait_windows(page, n: int, timeout: int = WAIT_MS) -> None:
    """Until the all-topics trace has `n` windows (non-null points)."""
    page.wait_for_function(
        f"""n => {{
            const fig = {FIGURE};
            const t = fig && fig.data && fig.data.find(t => t.name === "all topics");
            return t && t.y.filter(v => v !== null).length >= n;
        }}""",
        arg=n,
        timeout=timeout,
    )


def _shot(page, path: str) -> None:
    """A screenshot of the charts for a person to look at, clipped to their box: the charts
    redraw every 100 ms (partial windows), so an element screenshot can wait for a still
    element past its timeout on a loaded machine (CI did); this one does not wait."""
    page.evaluate("() => document.querySelector('.live').scrollIntoView({block: 'start'})")
    page.screenshot(path=path, clip=page.locator(".live").bounding_box())


def _moving_average(y: list, n: int) -> list:
    out, run = [], []
    for v in y:
        if v is None:
            run = []
            out.append(None)
            continue
        run = [*run, v][-n:]
        out.append(sum(run) / len(run))
    return out


def test_charts_pick_their_resolution_fill_the_axis_and_show_gaps(
    operator_login, server_process, browser
):
    server, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    _login(page, server, user, password)
    page.wait_for_selector('.live-indicator[data-live-state="live"]', timeout=WAIT_MS)

    # 15 minutes by default: 10-second windows, on an axis as long as the data
    _wait_windows(page, 2)
    live = page.locator("[data-live-scope]")
    assert live.get_attribute("data-live-resolution") == "10000"
    assert page.locator("[data-live-step]").inner_text() == "10-second windows"
    figure = _figure(page)
    total = _total(figure)
    xs = [x for x, y in zip(total["x"], total["y"], strict=True) if y is not None]
    assert all(x % 10_000 == 0 for x in xs)
    assert len(xs) <= 91
    start, end = figure["range"]
    assert end - start < 120_000, "a fresh server's data is not squeezed to the right edge"
    assert start <= min(xs) <= start + 10_000
    _shot(page, "/tmp/charts-15min-light.png")

    # 5 minutes: 1-second windows; a restart of the server is a gap, drawn as one
    page.click('[data-range="300000"]')
    page.wait_for_function(
        "() => document.querySelector('[data-live-scope]').dataset.liveResolution === '1000'"
    )
    _wait_windows(page, 5)
    server_process.stop()
    time.sleep(6)
    server_process.start()
    page.wait_for_selector('.live-indicator[data-live-state="live"]', timeout=WAIT_MS)
    before = len([y for y in _total(_figure(page))["y"] if y is not None])
    _wait_windows(page, before + 3)
    total = _total(_figure(page))
    assert total["connectgaps"] is False
    gaps = [i for i, y in enumerate(total["y"]) if y is None]
    assert gaps, "a restart leaves a gap"
    i = gaps[0]
    assert total["x"][i] == total["x"][i - 1] + 1000  # the null closes the window before
    assert total["x"][i + 1] - total["x"][i - 1] > 5_000  # and the next one is after the gap
    assert total["shape"] == "linear"
    _shot(page, "/tmp/charts-gap-light.png")

    # smoothed: a moving average of 5 windows that keeps the gap
    raw = total["y"]
    page.click("[data-smooth]")
    page.wait_for_function(f"() => {FIGURE}.data[0].line.shape === 'spline'")
    smooth = _total(_figure(page))
    assert smooth["y"][:i] == pytest.approx(_moving_average(raw, 5)[:i])
    assert smooth["y"][i] is None
    assert page.locator("[data-smooth]").get_attribute("aria-pressed") == "true"
    _shot(page, "/tmp/charts-smooth-light.png")

    page.click("[data-theme-toggle]")
    page.wait_for_timeout(300)
    _shot(page, "/tmp/charts-smooth-dark.png")
    page.click("[data-smooth]")
    page.wait_for_function(f"() => {FIGURE}.data[0].line.shape === 'linear'")
    _shot(page, "/tmp/charts-gap-dark.png")

    # the long ranges come from the 1-minute rollups: 5- and 15-minute windows
    for range_ms, step in ((21_600_000, "300000"), (86_400_000, "900000")):
        page.click(f'[data-range="{range_ms}"]')
        page.wait_for_function(
            "step => document.querySelector('[data-live-scope]').dataset.liveResolution === step",
            arg=step,
        )
    assert page.locator("[data-live-step]").inner_text() == "15-minute windows"
    # the rollups: each the average rate of the seconds it measured (not their total spread
    # over a whole minute), about what the 1-second chart showed. One window, or two when the
    # test straddles a 15-minute boundary; the open one is the open minute's mean so far.
    _wait_windows(page, 1, timeout=90_000)
    ys = [v for v in _total(_figure(page))["y"] if v is not None]
    assert 1 <= len(ys) <= 2
    per_second = [v for v in raw if v is not None]
    mean = sum(per_second) / len(per_second)
    assert all(0.5 < y / mean < 2 for y in ys), (ys, mean)
    _shot(page, "/tmp/charts-24h-dark.png")

    # a group's page: lag at its peak per window, the event-time rate with zeros, not gaps
    page.goto(server + "/groups/order-fulfilment/")
    page.wait_for_function(
        """() => {
            const fig = document.querySelector('[data-chart="group_rate"]');
            const t = fig && fig.data && fig.data.find(t => t.name.includes("event time"));
            return t && t.y.filter(v => v !== null).length >= 2;
        }""",
        timeout=WAIT_MS,
    )
    event_time = page.evaluate(
        """() => document.querySelector('[data-chart="group_rate"]').data
                 .find(t => t.name.includes("event time")).y"""
    )
    assert None not in event_time
    _shot(page, "/tmp/charts-group-dark.png")

    # the page's helpers with fixed numbers
    assert page.evaluate("() => TidelogLive.withGaps([0, 1000, 5000], [1, 2, 3], 1000)") == {
        "x": [0, 1000, 2000, 5000],
        "y": [1, 2, None, 3],
    }
    # an event-time rate's missing windows are zeros (its windows exist only where records are)
    assert page.evaluate("() => TidelogLive.withGaps([0, 3000], [1, 2], 1000, true)") == {
        "x": [0, 1000, 2000, 3000],
        "y": [1, 0, 0, 2],
    }
    assert page.evaluate("() => TidelogLive.movingAverage([2, 4, 6, null, 8], 2)") == [
        2,
        3,
        5,
        None,
        8,
    ]
    # 30 s of data on the 15-minute range: an axis of 30 s, not of 15 minutes
    assert page.evaluate("() => TidelogLive.xRange(970000, 1000000, 900000, 10000)") == [
        970000,
        1000000,
    ]
