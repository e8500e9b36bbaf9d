"""Numbers for people: counts (12,345 or 1.2 M), sizes (MB), times ("3 min ago"); group ids."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def group_label(group_id: str) -> str:
    """A group id as text on a page: control characters as their pictures, the empty id said."""
    from brokerui.console.messages.display import printable

    return printable(group_id) if group_id else "(empty id)"


@register.filter
def count(n) -> str:
    """12,345 below a million; 1.2 M, 3.4 G above."""
    if n is None or n == "":
        return "–"
    n = int(n)
    for limit, suffix in ((10**9, " G"), (10**6, " M")):
        if abs(n) >= limit:
            return f"{n / limit:.1f}{suffix}"
    return f"{n:,}"


@register.filter
def exact(n) -> str:
    return "–" if n is None or n == "" else f"{int(n):,}"


@register.filter
def size(n) -> str:
    """Bytes as B, KB, MB, GB (powers of 1024)."""
    if n is None:
        return "–"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TB"


def _dt(ms) -> datetime | None:
    if ms is None or ms == "" or int(ms) < 0:
        return None
    return datetime.fromtimestamp(int(ms) / 1000, UTC)


def _ago(when: datetime, now: datetime) -> str:
    seconds = (now - when).total_seconds()
    # less than a second ahead reads "0 s ago": whole seconds are shown, and a time a moment
    # ahead of this clock (a view's as-of tick, another host's clock) is not "in 0 s"
    future = seconds <= -1
    seconds = abs(seconds) if future else max(seconds, 0.0)
    for limit, div, unit in (
        (60, 1, "s"),
        (3600, 60, "min"),
        (86400, 3600, "h"),
        (86400 * 365, 86400, "d"),
    ):
        if seconds < limit:
            text = f"{int(seconds // div)} {unit}"
            break
    else:
        text = f"{int(seconds // (86400 * 365))} y"
    return f"in {text}" if future else f"{text} ago"


@register.filter
def ago_ms(ms):
    """A <time> saying "3 min ago", with the exact UTC time on hover."""
    when = _dt(ms)
    if when is None:
        return "never"
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        when.isoformat(),
        when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC",
        _ago(when, datetime.now(UTC)),
    )


@register.filter
def ago(when):
    """Same, for a datetime."""
    if when is None:
        return "never"
    return ago_ms(int(when.timestamp() * 1000))


@register.filter
def utc_ms(ms) -> str:
    when = _dt(ms)
    return "–" if when is None else when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@register.filter
def duration_ms(ms) -> str:
    """retention.ms and friends: 7 d, 12 h, 30 min; -1: forever."""
    if ms is None:
        return "–"
    ms = int(ms)
    if ms < 0:
        return "forever"
    for div, unit in ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1000, "s")):
        if ms >= div and ms % div == 0:
            return f"{ms // div:,} {unit}"
    return f"{ms:,} ms"


@register.filter
def span_ms(ms) -> str:
    """An approximate span of time: 40 s, 3 min 20 s, 2 h 5 min, 3.5 d; None: –."""
    if ms is None:
        return "–"
    s = max(0, float(ms)) / 1000
    if s < 60:
        return f"{s:.0f} s" if s >= 10 or s == int(s) else f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86_400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{s / 86_400:.1f} d"


@register.filter
def seconds_span(seconds) -> str:
    """`span_ms` for a number of seconds."""
    return "–" if seconds is None else span_ms(float(seconds) * 1000)


@register.filter
def percent(share) -> str:
    """A share (0.25) as a percentage: 25 %, 0.4 %, < 0.1 %; None: –."""
    if share is None:
        return "–"
    pct = float(share) * 100
    if pct == 0:
        return "0 %"
    if pct < 0.1:
        return "< 0.1 %"
    return f"{pct:.1f} %" if pct < 10 else f"{pct:.0f} %"


@register.filter
def lookup(mapping, key):
    """``mapping[key]`` in a template (None when missing): ``health|lookup:g.group_id``."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def hex_rows(dump: str):
    """A hex dump (`display.hex_dump`) with each line and its columns in spans, its text
    unchanged: a container too narrow for 16 bytes a line lays each out as two rows of 8
    (static/css/tidelog.css, ``.hx``), so the ASCII column is never cut off."""
    from brokerui.console.messages.display import hex_dump_columns

    lines = dump.split("\n")
    out = []
    for i, line in enumerate(lines):
        end = "\n" if i < len(lines) - 1 else ""
        columns = hex_dump_columns(line)
        if columns is None:
            out.append(format_html("{}{}", line, end))
            continue
        o, s1, h1, s2, h2, s3, a1, a2 = columns
        out.append(
            format_html(
                '<span class="hx"><span>{}</span>{}<span>{}</span>{}<span>{}</span>{}'
                "<span>{}</span><span>{}</span>{}</span>",
                o,
                s1,
                h1,
                s2,
                h2,
                s3,
                a1,
                a2,
                end,
            )
        )
    return mark_safe("".join(out))
