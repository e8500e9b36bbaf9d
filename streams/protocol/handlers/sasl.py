"""SaslHandshake and SaslAuthenticate outside an authentication: on a listener without SASL,
or on a connection that has already authenticated (Tidelog grants sessions without expiry, so
clients never re-authenticate). Kafka answers both with ILLEGAL_SASL_STATE. The exchange itself
is run by the connection (``server._Connection``) before any other request is served.
"""

from __future__ import annotations

from typing import Any

from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import BrokerContext, ErrorCode


async def handle_sasl_handshake(ctx: BrokerContext, req: Request) -> Any:
    return codec.make_response(req, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


async def handle_sasl_authenticate(ctx: BrokerContext, req: Request) -> Any:
    return codec.make_response(
        req,
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate outside a SASL exchange",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
