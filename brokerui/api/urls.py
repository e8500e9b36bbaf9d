"""Routes of the JSON API, mounted at ``/api/v1/``. No trailing slashes."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from brokerui.api import views

app_name = "api"

router = SimpleRouter(trailing_slash=False)
router.register("topics", views.TopicViewSet, basename="topic")
router.register("groups", views.GroupViewSet, basename="group")

urlpatterns = [
    path("schema", views.SchemaView.as_view(), name="schema"),
    path("docs", views.docs_page, name="docs"),
    *router.urls,
    re_path(r"^(?P<path>.*)$", views.not_found, name="not-found"),
]
