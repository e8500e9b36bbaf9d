"""Schemas routes. Registering under a new subject lives at /new-schema/ so that no subject name
("new" is a valid one) can shadow it; everything about one subject lives under
/schemas/<subject>/."""

from django.urls import path

from brokerui.console.schemas import views

urlpatterns = [
    path("schemas/", views.schema_list, name="schemas"),
    path("new-schema/", views.schema_register, name="schema_new"),
    path("new-schema/check/", views.schema_check, name="schema_check"),
    path("schemas/<str:subject>/", views.schema_detail, name="schema"),
    path("schemas/<str:subject>/register/", views.schema_register, name="schema_register"),
    path("schemas/<str:subject>/config/", views.schema_config, name="schema_config"),
    path("schemas/<str:subject>/delete/", views.schema_delete, name="schema_subject_delete"),
    path(
        "schemas/<str:subject>/delete-permanently/",
        views.schema_delete,
        {"permanent": True},
        name="schema_subject_delete_permanent",
    ),
    path(
        "schemas/<str:subject>/versions/<int:version>/delete/",
        views.schema_delete,
        name="schema_version_delete",
    ),
    path(
        "schemas/<str:subject>/versions/<int:version>/delete-permanently/",
        views.schema_delete,
        {"permanent": True},
        name="schema_version_delete_permanent",
    ),
]
