"""Writes of the Kafka port's credentials (keyword-only, `<entity>_<action>`)."""

from __future__ import annotations

from django.db import transaction

from brokerui.kafkaport.models import ScramCredential
from streams.protocol import security


def scram_credentials_set(*, user, password: str) -> None:
    """Derive and store `user`'s SCRAM-SHA-256 and SCRAM-SHA-512 credentials for `password`
    (a fresh salt each time), replacing earlier ones."""
    with transaction.atomic():
        for mechanism in security.SCRAM_HASHES:
            cred = security.scram_credential(mechanism, password)
            ScramCredential.objects.update_or_create(
                user=user,
                mechanism=mechanism,
                defaults={
                    "salt": cred.salt,
                    "stored_key": cred.stored_key,
                    "server_key": cred.server_key,
                    "iterations": cred.iterations,
                },
            )
