"""Consumer group ids in URLs: one path segment for any id, the same in the console and the API.

A group id is any string a Kafka client sends (empty, ``a/b``, ``..``, control characters...),
but a URL path cannot carry every string as it is: Django decodes ``%2F`` to ``/`` before
routing (so ``a/b`` would become two segments, and ``x/reset`` the reset page of ``x``), and
browsers resolve a ``.`` or ``..`` segment away before sending the request. So a group id is
written as one segment by this scheme, then percent-encoded as usual:

* ``~`` becomes ``~7E`` and ``/`` becomes ``~2F``;
* an id made of dots only has every dot written ``~2E`` (``..`` → ``~2E~2E``);
* the empty id is ``~`` alone;
* every other character stays (``reverse()`` percent-encodes what a URL cannot hold).

Reading a segment, ``~`` and two hex digits (00 to 7F) is that ASCII character; a ``~``
followed by anything else is malformed (404).

Plain ids (``billing``, ``orders.v2``, ``my group``) keep their usual URL. The console's routes
and the API's (``/api/v1/groups/<id>``) take group ids through `GroupIdConverter`, registered as
the path converter ``group_id``; `encode_group_id` is what a client does to build a URL.
"""

from __future__ import annotations

import re

from django.urls import register_converter

EMPTY = "~"
_ESCAPE = re.compile(r"~([0-7][0-9A-Fa-f])")  # an ASCII character
_BAD_TILDE = re.compile(r"~(?![0-7][0-9A-Fa-f])")


def encode_group_id(group_id: str) -> str:
    """The URL path segment of `group_id` (before percent-encoding)."""
    if not group_id:
        return EMPTY
    if not group_id.strip("."):
        return "~2E" * len(group_id)
    return group_id.replace("~", "~7E").replace("/", "~2F")


def decode_group_id(segment: str) -> str:
    """The group id of a path segment; ValueError for a malformed one (the route is a 404)."""
    if segment == EMPTY:
        return ""
    if "/" in segment or _BAD_TILDE.search(segment):
        raise ValueError(f"not a group id segment: {segment!r}")
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), segment)


class GroupIdConverter:
    """Django path converter ``<group_id:...>`` for `encode_group_id` segments."""

    regex = r"[^/]+"

    def to_python(self, value: str) -> str:
        return decode_group_id(value)

    def to_url(self, value: str) -> str:
        return encode_group_id(value)


register_converter(GroupIdConverter, "group_id")
