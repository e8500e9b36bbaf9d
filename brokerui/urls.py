"""URL routes of the Django project."""

from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

# Browsers ask for /favicon.ico where a page names no icon (JSON, plain text): the console's.
favicon = login_not_required(RedirectView.as_view(url=static("favicon.svg"), permanent=True))

urlpatterns = [
    path("favicon.ico", favicon),
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
