"""Django's password-changed hook, which keeps the users' SCRAM credentials in step with their
passwords.

Django calls ``password_changed(password, user)`` on every entry of AUTH_PASSWORD_VALIDATORS
once a new password is saved with ``User.set_password`` then ``save`` (``changepassword``, the
admin, the password-change page). This entry checks nothing: it derives the SCRAM credentials
from the new password. Its help text tells users the password also signs them in on the Kafka
port.

``create_user`` and ``create_superuser`` (so ``createsuperuser``) hash the password without
that hook: such users get their SCRAM credentials at their first console sign-in
(``backends``) or PLAIN sign-in on the Kafka port (``adapters``), or when the password is set
again; ``ensure_admin`` derives the first admin's at once.
"""

from __future__ import annotations


class KafkaScramCredentials:
    def validate(self, password: str, user=None) -> None:
        return None

    def password_changed(self, password: str, user=None) -> None:
        if user is not None and user.pk is not None:
            from brokerui.kafkaport.services import scram_credentials_set

            scram_credentials_set(user=user, password=password)

    def get_help_text(self) -> str:
        return "Your password also signs you in on the Kafka port (SASL PLAIN and SCRAM)."
