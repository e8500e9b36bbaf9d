"""Role bindings, kept in the console's database (see brokerui.access.grants for the rules)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from brokerui.access import grants


class RoleBinding(models.Model):
    USER, GROUP = "user", "group"
    SUBJECT_TYPES = [(USER, "user"), (GROUP, "group")]

    subject_type = models.CharField(max_length=8, choices=SUBJECT_TYPES)
    subject = models.CharField(max_length=150)  # a user name, or a group's (an OIDC group's)
    role = models.CharField(max_length=16, choices=[(r, r) for r in grants.ROLES])
    cluster = models.CharField(max_length=100, default=grants.ANY_CLUSTER)
    kind = models.CharField(max_length=16, choices=[(k, k) for k in grants.KINDS])
    pattern = models.CharField(max_length=255, default="*")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["subject_type", "subject", "cluster", "kind", "pattern"]
        constraints = [
            models.UniqueConstraint(
                fields=["subject_type", "subject", "role", "cluster", "kind", "pattern"],
                name="access_binding_unique",
            )
        ]

    def as_binding(self) -> grants.Binding:
        return grants.Binding(grants.ROLES[self.role], self.cluster, self.kind, self.pattern)

    def __str__(self) -> str:
        return (
            f"{self.subject_type} {self.subject}: {self.role} of {self.as_binding().scope_text()}"
        )
