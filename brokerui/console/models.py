"""The console's models (Django finds them here): users' metric panels."""

from brokerui.console.live.models import MetricPanel

__all__ = ["MetricPanel"]
