"""Routes of the user's metric panels."""

from django.urls import path

from brokerui.console.live import views

urlpatterns = [
    path("panels/", views.panel_list, name="panels"),
    path("panels/<int:pk>/", views.panel_detail, name="panel"),
    path("panels/<int:pk>/edit/", views.panel_edit, name="panel_edit"),
    path("panels/<int:pk>/delete/", views.panel_delete, name="panel_delete"),
]
