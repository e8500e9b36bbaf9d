"""Prometheus metrics at ``/metrics``: kafka_exporter's names for offsets, lag and members, read
from the cluster on each scrape (`collector`), and Tidelog's own counters and histograms fed by
the engine's hot paths through ``streams.telemetry`` (`instruments`). See `registry`."""
