"""Routes of the JSON API, mounted at ``/api/v1/``. No trailing slashes."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

import brokerui.group_paths  # noqa: F401 - registers the group_id path converter
from brokerui.api import jobviews, views

app_name = "api"

router = SimpleRouter(trailing_slash=False)
router.register("topics", views.TopicViewSet, basename="topic")
router.register("jobs", views.JobViewSet, basename="job")
router.register("capture", views.CaptureViewSet, basename="capture")
# group ids go through the console's converter (brokerui/group_paths.py): Django path routes
group_router = SimpleRouter(trailing_slash=False, use_regex_path=False)
group_router.register("groups", views.GroupViewSet, basename="group")
group_router.register("transactions", views.TransactionViewSet, basename="transaction")

urlpatterns = [
    path("schema", views.SchemaView.as_view(), name="schema"),
    path("docs", views.docs_page, name="docs"),
    *router.urls,
    *group_router.urls,
    path("views", jobviews.JobViewViewSet.as_view({"get": "list"}), name="views"),
    path(
        "views/<str:job>/<str:view>",
        jobviews.JobViewViewSet.as_view({"get": "read"}),
        name="view-read",
    ),
    re_path(r"^(?P<path>.*)$", views.not_found, name="not-found"),
]
