from django.urls import path

from brokerui.console.groups import views

# Group ids are free text in Kafka (slashes included), hence `path:`. The routes with a suffix
# come first, longest first ("offsets/delete/" before "delete/"), so that ".../reset/" is the
# reset page of the group before it. (A group id that itself ends in "/reset" or "/delete" can
# be seen and reset but is ambiguous here; Django decodes %2F before routing, so there is no
# escaping it.)
urlpatterns = [
    path("groups/", views.group_list, name="groups"),
    path("groups/<path:group_id>/reset/plan.csv", views.group_reset_csv, name="group_reset_csv"),
    path("groups/<path:group_id>/reset/", views.group_reset, name="group_reset"),
    path(
        "groups/<path:group_id>/offsets/delete/",
        views.group_delete_offsets,
        name="group_delete_offsets",
    ),
    path("groups/<path:group_id>/delete/", views.group_delete, name="group_delete"),
    path("groups/<path:group_id>/", views.group_detail, name="group"),
]
