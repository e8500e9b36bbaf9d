from django.urls import path

from brokerui.console.audit_log import views

urlpatterns = [
    path("audit/", views.audit_list, name="audit"),
]
