"""Users for the SASL tests: an in-memory `Authenticator` (the listener's seam)."""

from __future__ import annotations

from streams.protocol.security import Role, scram_credential

PASSWORDS = {"olivia": "operator-pass", "victor": "viewer-pass", "nora": "no-role-pass"}


class Users:
    """An in-memory Authenticator: passwords kept only as SCRAM credentials and for PLAIN."""

    def __init__(self):
        self.roles = {"olivia": Role.OPERATOR, "victor": Role.VIEWER, "nora": Role.NONE}
        self.creds = {
            (user, m): scram_credential(m, pw)
            for user, pw in PASSWORDS.items()
            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        }

    def check_plain(self, user, password, peer):
        return PASSWORDS.get(user) == password

    def scram_credential(self, user, mechanism, peer):
        return self.creds.get((user, mechanism))

    def scram_result(self, user, mechanism, peer, ok):
        pass

    def role(self, user):
        return self.roles.get(user, Role.NONE)
