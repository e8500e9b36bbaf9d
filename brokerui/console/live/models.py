"""`MetricPanel`: a user's own metric panel, its `PanelSpec` kept as JSON.

Panels belong to one user: every query goes through ``MetricPanel.objects.filter(user=…)``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class MetricPanel(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="metric_panels"
    )
    name = models.CharField(max_length=80)
    spec = models.JSONField(help_text="PanelSpec.to_dict()")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    @property
    def panel_id(self) -> str:
        """The id of its job in `broker.panels` (unique across users)."""
        return f"user-panel-{self.pk}"
