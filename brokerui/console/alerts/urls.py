from django.urls import path

from brokerui.console.alerts import views

urlpatterns = [
    path("alerts/", views.alert_list, name="alerts"),
    path("alerts/new/", views.alert_create, name="alert_create"),
    path("alerts/<str:rule_id>/edit/", views.alert_edit, name="alert_edit"),
    path("alerts/<str:rule_id>/delete/", views.alert_delete, name="alert_delete"),
]
