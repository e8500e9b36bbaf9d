"""Role bindings, kept in the console's database (see brokerui.access.grants for the rules)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from brokerui.access import grants, masking


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


class MaskRule(models.Model):
    """A field hidden from users without the ``access.unmask`` permission (brokerui.access.
    masking)."""

    topic = models.CharField(max_length=255)  # a pattern: payments, team-a.*, *
    path = models.CharField(max_length=255)  # value.card.number, headers.authorization
    action = models.CharField(max_length=8, choices=[(a, a) for a in masking.ACTIONS])
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["topic", "path"]
        permissions = [("unmask", "Sees masked fields in the clear")]
        constraints = [models.UniqueConstraint(fields=["topic", "path"], name="access_mask_unique")]

    def as_rule(self) -> masking.MaskRule:
        return masking.MaskRule(self.topic, self.path, self.action)

    def __str__(self) -> str:
        return f"{self.action} {self.path} of topics {self.topic}"
