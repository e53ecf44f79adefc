"""Prometheus metrics of the control plane itself: request latency, event-loop lag and operations by status."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from instantstart.api.ws_limits import SocketSlots


class _OperationsCollector(Collector):
    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("instantstart_operations", "Operations by status", labels=["status"])
        for status, count in sorted(self._counts().items()):
            family.add_metric([status], count)
        yield family


class _SocketsCollector(Collector):
    def __init__(self, slots: Iterable[SocketSlots]) -> None:
        self._slots = tuple(slots)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        open_now = GaugeMetricFamily("instantstart_websockets_open", "Open WebSockets by kind", labels=["kind"])
        closed = CounterMetricFamily("instantstart_websockets_bounded", "WebSockets closed by a bound (too_many: "
                                     "4429, too_slow: 4408)", labels=["kind", "reason"])
        for slots in self._slots:
            open_now.add_metric([slots.what], sum(slots.open.values()))
            for reason in ("too_many", "too_slow"):
                closed.add_metric([slots.what, reason], slots.closed[reason])
        yield open_now
        yield closed


LAG_INTERVAL = 0.01
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


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
        self.loop_lag = Histogram(
            "instantstart_event_loop_lag_seconds",
            "How late the event loop woke a 10 ms timer (time the loop could run nothing else)",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.loop_busy = Histogram(
            "instantstart_event_loop_busy_lag_seconds",
            "The part of the loop lag its thread spent running code (CPU time): a stall of ours, not the OS "
            "scheduling other processes first",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_OperationsCollector(operation_counts))

    async def watch_loop(self, interval: float = LAG_INTERVAL) -> None:
        """Forever: sleep `interval` on the loop and record how much later than asked it woke up."""
        while True:
            started, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(interval)
            late = max(0.0, time.perf_counter() - started - interval)
            self.loop_lag.observe(late)
            # On a busy machine the OS may run other processes first: that lateness costs this thread no CPU time.
            self.loop_busy.observe(min(late, time.thread_time() - cpu))

    def watch_sockets(self, *slots: SocketSlots) -> None:
        """Export the WebSocket bounds' counts (open sockets, sockets closed by a bound)."""
        self.registry.register(_SocketsCollector(slots))

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
