"""URL routes of the Django project."""

from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

# Browsers ask for /favicon.ico where a page names no icon (JSON, plain text): the console's.
favicon = login_not_required(RedirectView.as_view(url=static("favicon.svg"), permanent=True))

# the same for every cluster: sign-in, role bindings, the Prometheus endpoint, the icon
shared_patterns = [
    path("favicon.ico", favicon),
    path("accounts/", include("brokerui.accounts.urls")),
    path("access/", include("brokerui.access.urls")),  # role bindings, for every cluster
    path("metrics", include("brokerui.metrics.urls")),  # Prometheus, token-protected
]
# a cluster's pages and API: at / for the default cluster, and under /c/NAME/ for each
# (brokerui.cluster.urlconf_for, chosen per request by ClusterMiddleware)
cluster_patterns = [
    path("api/v1/", include("brokerui.api.urls")),
    path("", include("brokerui.console.urls")),
]
urlpatterns = [*shared_patterns, *cluster_patterns]

# The console's error pages (its layout, the reason, a way back); JSON under /api/.
handler400 = "brokerui.console.errors.bad_request"
handler403 = "brokerui.console.errors.permission_denied"
handler404 = "brokerui.console.errors.page_not_found"
handler500 = "brokerui.console.errors.server_error"
