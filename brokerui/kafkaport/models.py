"""SCRAM credentials of the console's users, for SASL/SCRAM on the Kafka port.

Django keeps passwords as PBKDF2 hashes, from which no SCRAM credential can be computed: SCRAM
needs its own salted password per mechanism (RFC 5802). They are derived from the password when
it is set (`services.scram_credentials_set`, called by Django's password-changed hook, see
`passwords`), one row per user and mechanism; the password itself is never stored.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ScramCredential(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scram_credentials"
    )
    mechanism = models.CharField(max_length=16)  # SCRAM-SHA-256 or SCRAM-SHA-512
    salt = models.BinaryField()
    stored_key = models.BinaryField()
    server_key = models.BinaryField()
    iterations = models.PositiveIntegerField()
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "mechanism"], name="one_scram_per_mechanism")
        ]

    def __str__(self) -> str:
        return f"{self.mechanism} credential of user {self.user_id}"
