"""Request body parsing with a size limit: DRF's JSON parser reads the whole body and, unlike
Django's form parsing, ignores ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""

from __future__ import annotations

import io

from django.conf import settings
from rest_framework.parsers import JSONParser

from brokerui.api.errors import RequestTooLarge

# Large enough for a batch of records at the default max.message.bytes (1 MB) in base64.
DEFAULT_MAX_BODY_BYTES = 16 << 20


def max_body_bytes() -> int:
    return int(getattr(settings, "TIDELOG_API_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))


class LimitedJSONParser(JSONParser):
    """JSON bodies up to ``max_body_bytes()``; larger ones get 413 ``request_too_large``."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = max_body_bytes()
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise RequestTooLarge(
                f"the request body is larger than {limit:,} bytes; send fewer records per request",
                limit_bytes=limit,
            )
        return super().parse(io.BytesIO(body), media_type, parser_context)
