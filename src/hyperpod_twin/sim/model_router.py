"""The simulated SGLang router: forwards each request to a worker model server and counts what it served."""

from __future__ import annotations

import itertools
import json
import threading
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from hyperpod_twin.kube.runtime import ProxyHandler, ProxyResponse
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.model_server import GENERATION_ROUTES, command_words, flag_value, flag_values, json_reply

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim


class RouterHandler:
    """The SGLang router: forwards each request to a worker (round robin over --worker-urls, or over
    Ready pods matching --selector with --service-discovery)."""

    def __init__(self, sim: ClusterSim, namespace: str, container: Obj) -> None:
        self.sim = sim
        self.namespace = namespace
        words = command_words(container)
        self._urls = flag_values(words, "--worker-urls")
        self._selector = dict(s.split("=", 1) for s in flag_values(words, "--selector") if "=" in s)
        self._discovery = "--service-discovery" in words
        sd_port = flag_value(words, "--service-discovery-port")
        self._sd_port = int(sd_port) if sd_port and sd_port.isdigit() else 80
        sd_ns = flag_value(words, "--service-discovery-namespace")
        self._sd_namespace = sd_ns
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._running: list[tuple[float, str]] = []  # (twin time the request finishes, worker URL)
        self._processed: dict[str, int] = {}

    def __call__(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> ProxyResponse:
        route = "/" + path.lstrip("/")
        workers = self._workers()
        if route == "/health":
            return ProxyResponse(200 if workers else 503, b"", {"Content-Type": "text/plain"})
        if route == "/workers" or route == "/list_workers":
            return json_reply(200, {"urls": [url for _, _, _, _, url in workers]})
        if route == "/metrics":
            return ProxyResponse(200, self._metrics(workers).encode(), {"Content-Type": "text/plain; version=0.0.4"})
        if not workers:
            return json_reply(503, {"error": {"message": "no available workers", "type": "service_unavailable"}})
        start = next(self._counter)
        for i in range(len(workers)):
            _, _, _, handler, url = workers[(start + i) % len(workers)]
            response = handler(method, route, query, headers, body)
            if response.status < 500:
                self._account(route, url, response)
                return response
        return response

    def _account(self, route: str, url: str, response: ProxyResponse) -> None:
        """A generation request stays running for its simulated generation time (prefill, then each
        completion token at the simulator's decode speed): what sgl_router_running_requests counts."""
        if route not in GENERATION_ROUTES or response.status != 200:
            return
        try:
            tokens = int((json.loads(response.body or b"{}").get("usage") or {}).get("completion_tokens", 0))
        except (ValueError, AttributeError, TypeError):
            tokens = 0
        config = self.sim.config
        done = self.sim.clock.now() + config.prefill_seconds + tokens * config.decode_seconds_per_token
        with self._lock:
            self._running.append((done, url))
            self._processed[url] = self._processed.get(url, 0) + 1

    def _metrics(self, workers: list[tuple[str, str, int, ProxyHandler, str]]) -> str:
        """The router's Prometheus metrics (sgl-router names): per-worker running and processed requests and
        the number of healthy workers."""
        now = self.sim.clock.now()
        with self._lock:
            self._running = [(done, url) for done, url in self._running if done > now]
            running = {url: 0 for *_, url in workers}
            for _, url in self._running:
                running[url] = running.get(url, 0) + 1
            processed = {**{url: 0 for *_, url in workers}, **self._processed}
        lines = ["# TYPE sgl_router_running_requests gauge"]
        lines += [f'sgl_router_running_requests{{worker="{url}"}} {n}' for url, n in sorted(running.items())]
        lines.append("# TYPE sgl_router_processed_requests_total counter")
        lines += [f'sgl_router_processed_requests_total{{worker="{url}"}} {n}' for url, n in sorted(processed.items())]
        lines += ["# TYPE sgl_router_active_workers gauge", f"sgl_router_active_workers {len(workers)}"]
        return "\n".join(lines) + "\n"

    def _workers(self) -> list[tuple[str, str, int, ProxyHandler, str]]:
        from hyperpod_twin.sim.kinds import PODS, SERVICES

        found: list[tuple[str, str, int, ProxyHandler, str]] = []
        pods = self.sim.list(PODS)
        if self._discovery and self._selector:
            for pod in pods:
                ns = pod["metadata"]["namespace"]
                if self._sd_namespace and ns != self._sd_namespace:
                    continue
                if not kobj.pod_is_ready(pod) or not kobj.match_map(self._selector, pod["metadata"].get("labels")):
                    continue
                handler = self.sim.runtime.pod_http.lookup(ns, pod["metadata"]["name"], self._sd_port)
                if handler is not None and not isinstance(handler, RouterHandler):
                    found.append((ns, pod["metadata"]["name"], self._sd_port, handler, _url(pod, self._sd_port)))
        for url in self._urls:
            parsed = urlparse(url if "://" in url else f"http://{url}")
            host, port = parsed.hostname or "", parsed.port or 80
            for pod in pods:
                if not kobj.pod_is_ready(pod):
                    continue
                ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
                if pod.get("status", {}).get("podIP") == host or host.split(".")[0] == name:
                    handler = self.sim.runtime.pod_http.lookup(ns, name, port)
                    if handler is not None:
                        found.append((ns, name, port, handler, _url(pod, port)))
            # A Service DNS name (svc.ns.svc.cluster.local): every ready pod behind its selector.
            parts = host.split(".")
            svc_ns = parts[1] if len(parts) > 1 else self.namespace
            svc = self.sim.get(SERVICES, svc_ns, parts[0])
            if svc is None:
                continue
            for sport in svc.get("spec", {}).get("ports") or []:
                if int(sport.get("port", 0)) != port:
                    continue
                target = sport.get("targetPort", port)
                for pod in pods:
                    if pod["metadata"]["namespace"] != svc_ns or not kobj.pod_is_ready(pod):
                        continue
                    if not kobj.match_map(svc["spec"].get("selector") or {"-": "-"}, pod["metadata"].get("labels")):
                        continue
                    tport = kobj.target_port(pod, target)
                    handler = self.sim.runtime.pod_http.lookup(svc_ns, pod["metadata"]["name"], tport)
                    if handler is not None:
                        found.append((svc_ns, pod["metadata"]["name"], tport, handler, _url(pod, tport)))
        return found


def _url(pod: Obj, port: int) -> str:
    """A worker's URL as the router names it (pod IP and port)."""
    return f"http://{pod.get('status', {}).get('podIP') or pod['metadata']['name']}:{port}"
