"""URL routes of the Django project."""

from django.urls import include, path

urlpatterns = [
    path("accounts/", include("brokerui.accounts.urls")),
    path("api/v1/", include("brokerui.api.urls")),
    path("metrics", include("brokerui.metrics.urls")),  # Prometheus, token-protected
    path("", include("brokerui.console.urls")),
]

# The console's error pages (its layout, the reason, a way back); JSON under /api/.
handler400 = "brokerui.console.errors.bad_request"
handler403 = "brokerui.console.errors.permission_denied"
handler404 = "brokerui.console.errors.page_not_found"
handler500 = "brokerui.console.errors.server_error"
