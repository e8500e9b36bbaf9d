"""The console's sign-in backend: Django's ModelBackend, which also derives a user's SCRAM
credentials for the Kafka port at the first sign-in after the password was set without them
(``create_user`` and ``createsuperuser`` store only Django's hash, and call no
password-changed hook: see ``passwords``)."""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend


class ModelBackendWithScram(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and password and not user.scram_credentials.exists():
            from brokerui.kafkaport.services import scram_credentials_set

            scram_credentials_set(user=user, password=password)
        return user
