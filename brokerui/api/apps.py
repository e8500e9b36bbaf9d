from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "brokerui.api"
    label = "api"
    verbose_name = "JSON API"
