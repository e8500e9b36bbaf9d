from django.urls import path

import brokerui.group_paths  # noqa: F401 - registers the group_id path converter
from brokerui.console.groups import views

# Group ids are free text in Kafka: `<group_id:...>` writes any id as one path segment
# (brokerui/group_paths.py), so the suffixed routes below are never ambiguous.
urlpatterns = [
    path("groups/", views.group_list, name="groups"),
    path(
        "groups/<group_id:group_id>/reset/plan.csv",
        views.group_reset_csv,
        name="group_reset_csv",
    ),
    path("groups/<group_id:group_id>/reset/", views.group_reset, name="group_reset"),
    path(
        "groups/<group_id:group_id>/offsets/delete/",
        views.group_delete_offsets,
        name="group_delete_offsets",
    ),
    path("groups/<group_id:group_id>/delete/", views.group_delete, name="group_delete"),
    path("groups/<group_id:group_id>/", views.group_detail, name="group"),
]
