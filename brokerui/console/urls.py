"""Console routes. Each area (topics, messages, groups, audit, live panels, alerts) owns its routes
and views."""

from django.urls import path

from brokerui.console import views
from brokerui.console.alerts import urls as alert_urls
from brokerui.console.audit_log import urls as audit_urls
from brokerui.console.capture import urls as capture_urls
from brokerui.console.dualwrite import urls as dualwrite_urls
from brokerui.console.groups import urls as group_urls
from brokerui.console.jobs import urls as job_urls
from brokerui.console.jobviews import urls as jobview_urls
from brokerui.console.live import urls as live_urls
from brokerui.console.messages import urls as message_urls
from brokerui.console.schemas import urls as schema_urls
from brokerui.console.search import urls as search_urls
from brokerui.console.topics import urls as topic_urls
from brokerui.console.transactions import urls as transaction_urls

app_name = "console"

urlpatterns = [
    path("", views.home, name="home"),
    *topic_urls.urlpatterns,
    *message_urls.urlpatterns,
    *group_urls.urlpatterns,
    *transaction_urls.urlpatterns,
    *job_urls.urlpatterns,
    *audit_urls.urlpatterns,
    *live_urls.urlpatterns,
    *alert_urls.urlpatterns,
    *jobview_urls.urlpatterns,
    *dualwrite_urls.urlpatterns,
    *search_urls.urlpatterns,
    *capture_urls.urlpatterns,
    *schema_urls.urlpatterns,
]
