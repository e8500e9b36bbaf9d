from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "brokerui.access"
    label = "access"
    verbose_name = "Access: role bindings"
    default_auto_field = "django.db.models.BigAutoField"
