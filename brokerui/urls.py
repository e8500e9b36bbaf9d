"""URL routes of the Django project."""

from django.urls import include, path

urlpatterns = [
    path("", include("brokerui.console.urls")),
]
