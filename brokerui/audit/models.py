"""Audit records: who changed what, when, with the state before and after."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    username = models.CharField(max_length=150)  # kept when the user is deleted
    action = models.CharField(max_length=64, db_index=True)  # e.g. topic.create, group.reset
    target = models.CharField(max_length=300)  # e.g. topic orders, group billing
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    source = models.CharField(max_length=16, default="console")  # console | api | cli | kafka
    # the cluster the change was made on (brokerui.cluster: "local" is the built-in broker)
    cluster = models.CharField(max_length=32, default="", blank=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username} {self.action} {self.target}"
