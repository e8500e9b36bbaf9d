from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "brokerui.metrics"
    label = "metrics"
    verbose_name = "Prometheus metrics"

    def ready(self) -> None:
        # the engine reports to Prometheus from now on (it measures nothing by default)
        from brokerui.metrics.registry import install_instruments

        install_instruments()
