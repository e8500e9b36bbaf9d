from django.urls import path

from brokerui.metrics.views import MetricsView

app_name = "metrics"

urlpatterns = [path("", MetricsView.as_view(), name="metrics")]
