from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "brokerui.audit"
    label = "audit"
    verbose_name = "Audit log"
