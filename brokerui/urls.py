"""URL routes of the Django project."""

from django.urls import include, path

urlpatterns = [
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("brokerui.api.urls")),
    path("", include("brokerui.console.urls")),
]
