"""What the simulated kubelets give a twin cluster's API server: pod logs and pod HTTP answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hyperpod_twin.kube.store import ObjectStore


@dataclass
class LogLine:
    """One line a container wrote, with its (real) Unix timestamp."""

    timestamp: float
    text: str


class PodLogStore:
    """Container logs by (namespace, pod, container); readers can block for new lines (follow)."""

    def __init__(self) -> None:
        self._lines: dict[tuple[str, str, str], list[LogLine]] = {}
        self._closed: set[tuple[str, str, str]] = set()
        self._cond = threading.Condition()

    def append(self, namespace: str, pod: str, container: str, text: str) -> None:
        """Record a line written by a container."""
        with self._cond:
            self._lines.setdefault((namespace, pod, container), []).append(LogLine(time.time(), text))
            self._cond.notify_all()

    def close(self, namespace: str, pod: str, container: str) -> None:
        """The container exited: followers stop after the last line."""
        with self._cond:
            self._closed.add((namespace, pod, container))
            self._cond.notify_all()

    def forget(self, namespace: str, pod: str) -> None:
        """Drop the logs of a deleted pod."""
        with self._cond:
            for key in [k for k in self._lines if k[:2] == (namespace, pod)]:
                del self._lines[key]
            self._closed = {k for k in self._closed if k[:2] != (namespace, pod)}
            self._cond.notify_all()

    def containers(self, namespace: str, pod: str) -> list[str]:
        """Containers of a pod that have written anything."""
        with self._cond:
            return sorted(k[2] for k in self._lines if k[:2] == (namespace, pod))

    def read(self, namespace: str, pod: str, container: str, start: int = 0) -> list[LogLine]:
        """Lines from index `start` on."""
        with self._cond:
            return list(self._lines.get((namespace, pod, container), [])[start:])

    def is_closed(self, namespace: str, pod: str, container: str) -> bool:
        """Whether the container has exited."""
        with self._cond:
            return (namespace, pod, container) in self._closed

    def wait(self, namespace: str, pod: str, container: str, start: int, timeout: float) -> bool:
        """Block until there are lines past `start`, the container exits, or `timeout` passes."""
        key = (namespace, pod, container)
        with self._cond:
            return self._cond.wait_for(
                lambda: len(self._lines.get(key, [])) > start or key in self._closed, timeout=timeout
            )


@dataclass
class ProxyResponse:
    """What a pod answered over HTTP."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})


# handler(method, path_after_proxy, query_string, headers, body) -> ProxyResponse
ProxyHandler = Callable[[str, str, str, dict[str, str], bytes], ProxyResponse]


class PodHttpRegistry:
    """HTTP handlers of running pods, by (namespace, pod name, container port).

    The simulator registers a handler when a serving pod becomes Ready and removes it when the pod
    goes; the API server's service proxy picks a ready endpoint of the service and calls it.
    """

    def __init__(self) -> None:
        self._handlers: dict[tuple[str, str, int], ProxyHandler] = {}
        self._lock = threading.Lock()

    def register(self, namespace: str, pod: str, port: int, handler: ProxyHandler) -> None:
        """Make `pod` answer HTTP on `port`."""
        with self._lock:
            self._handlers[(namespace, pod, port)] = handler

    def unregister_pod(self, namespace: str, pod: str) -> None:
        """The pod went away."""
        with self._lock:
            for key in [k for k in self._handlers if k[:2] == (namespace, pod)]:
                del self._handlers[key]

    def handlers_of(self, namespace: str, pod: str) -> list[tuple[int, ProxyHandler]]:
        """(port, handler) of every port a pod serves."""
        with self._lock:
            return sorted(((k[2], h) for k, h in self._handlers.items() if k[:2] == (namespace, pod)),
                          key=lambda item: item[0])

    def lookup(self, namespace: str, pod: str, port: int) -> ProxyHandler | None:
        """The handler for a pod port, if the pod serves it."""
        with self._lock:
            return self._handlers.get((namespace, pod, port))


@dataclass
class ClusterRuntime:
    """Everything of one twin Kubernetes cluster that its API server and the simulator share."""

    name: str  # the EKS cluster name
    arn: str
    store: ObjectStore
    logs: PodLogStore = field(default_factory=PodLogStore)
    pod_http: PodHttpRegistry = field(default_factory=PodHttpRegistry)
    oidc_issuer: str | None = None  # the EKS cluster's OIDC issuer: service-account tokens are signed for it
    kubernetes_version: str = "1.32"  # the EKS cluster's minor version: what /version reports
