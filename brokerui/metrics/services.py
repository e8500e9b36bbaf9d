"""The one selector the ``/metrics`` view calls."""

from __future__ import annotations

import copy
from collections.abc import Iterator

from prometheus_client.exposition import choose_encoder

from brokerui.access.grants import GROUP, TOPIC, BindingGrants
from brokerui.metrics.registry import registry
from streams.protocol.security import Role

# the labels that name a topic or a group, in kafka_exporter's metrics and the engine's own
_RESOURCE_LABELS = {"topic": TOPIC, "consumergroup": GROUP, "group": GROUP}


def metrics_exposition(*, accept: str, grants: BindingGrants) -> tuple[bytes, str]:
    """The registry's samples as (body, content type): Prometheus text format 0.0.4, or
    OpenMetrics when the scraper's Accept header asks for it. A scraper whose user reads only
    some topics or groups (`grants`) gets only their series."""
    encoder, content_type = choose_encoder(accept)
    source = registry()
    if grants.cluster_role() < Role.VIEWER:
        source = _Visible(source, grants)
    return encoder(source), content_type


class _Visible:
    """A registry's families without the samples of topics and groups `grants` do not read."""

    def __init__(self, source, grants: BindingGrants):
        self.source, self.grants = source, grants

    def collect(self) -> Iterator:
        for family in self.source.collect():
            kept = [s for s in family.samples if self._shows(s.labels)]
            if len(kept) != len(family.samples):
                family = copy.copy(family)
                family.samples = kept
            yield family

    def _shows(self, labels: dict) -> bool:
        for label, kind in _RESOURCE_LABELS.items():
            name = labels.get(label)
            if name is not None and self.grants.role_on(kind, name) < Role.VIEWER:
                return False
        return True
