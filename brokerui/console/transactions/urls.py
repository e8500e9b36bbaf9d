from django.urls import path

import brokerui.group_paths  # noqa: F401 - registers the group_id path converter
from brokerui.console.transactions import views

# Transactional ids are free text, as group ids are: the same one-segment converter.
urlpatterns = [
    path("transactions/", views.transaction_list, name="transactions"),
    path(
        "transactions/<group_id:transactional_id>/abort/",
        views.transaction_abort,
        name="transaction_abort",
    ),
]
