"""The one selector the ``/metrics`` view calls."""

from __future__ import annotations

from prometheus_client.exposition import choose_encoder

from brokerui.metrics.registry import registry


def metrics_exposition(*, accept: str) -> tuple[bytes, str]:
    """The registry's samples as (body, content type): Prometheus text format 0.0.4, or
    OpenMetrics when the scraper's Accept header asks for it."""
    encoder, content_type = choose_encoder(accept)
    return encoder(registry()), content_type
