from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "brokerui.accounts"
    label = "accounts"
    verbose_name = "Accounts"
