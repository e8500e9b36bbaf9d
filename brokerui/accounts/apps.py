from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "brokerui.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from brokerui.accounts import signals

        # connected after axes' receiver (axes comes first in INSTALLED_APPS)
        user_login_failed.connect(signals.login_failed, dispatch_uid="tidelog-login-failed")
