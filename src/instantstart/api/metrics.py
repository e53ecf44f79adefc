"""Prometheus metrics of the control plane itself: request latency and operations by status."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class _OperationsCollector(Collector):
    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("instantstart_operations", "Operations by status", labels=["status"])
        for status, count in sorted(self._counts().items()):
            family.add_metric([status], count)
        yield family


class Metrics:
    """A private registry per app (tests start many apps in one process)."""

    def __init__(self, operation_counts: Callable[[], dict[str, int]]) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "instantstart_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.registry.register(_OperationsCollector(operation_counts))

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
