from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "brokerui.console"
    label = "console"
    verbose_name = "Tidelog console"
