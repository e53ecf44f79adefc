"""The service and pod proxy subresources: forward a request to a Ready pod's simulated HTTP handler."""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import urlencode

from hyperpod_twin.kube.http import Request, Response
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.selectors import match_label_selector
from hyperpod_twin.kube.status import ApiError, not_found
from hyperpod_twin.kube.store_errors import NotFoundError
from hyperpod_twin.kube.types import core

Obj = dict[str, Any]
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "authorization", "host",
                "content-length", "proxy-authorization"}


def parse_proxy_name(text: str) -> tuple[str, str, str]:
    """`name`, `name:port` or `scheme:name:port` → (scheme, name, port)."""
    parts = text.split(":")
    if len(parts) == 1:
        return "", parts[0], ""
    if len(parts) == 2:
        return "", parts[0], parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise ApiError(400, f"invalid service request {text!r}", "BadRequest")


def _pod_ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _container_port(pod: Obj, target: Any) -> int | None:
    if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target:
                return int(port["containerPort"])
    return None


class ServiceProxy:
    """Resolves service → ready endpoint → pod port and calls the pod's registered handler."""

    def __init__(self, runtime: ClusterRuntime) -> None:
        self.runtime = runtime
        self._turn = itertools.count()

    def _candidates(self, namespace: str, service: Obj, svc_port: Obj) -> list[tuple[str, int]]:
        store = self.runtime.store
        name = service["metadata"]["name"]
        out: list[tuple[str, int]] = []
        try:
            endpoints = store.get(core("endpoints"), namespace, name)
        except NotFoundError:
            endpoints = None
        if endpoints is not None:
            for subset in endpoints.get("subsets") or []:
                ports = subset.get("ports") or []
                port = next((p for p in ports if p.get("name", "") == svc_port.get("name", "")), None)
                port = port or (ports[0] if len(ports) == 1 else None)
                for address in subset.get("addresses") or []:
                    ref = address.get("targetRef") or {}
                    if ref.get("kind") == "Pod" and port is not None:
                        out.append((str(ref.get("name")), int(port["port"])))
            if out:
                return out
        selector = (service.get("spec") or {}).get("selector")
        if not selector:
            return out
        pods, _ = store.list(core("pods"), namespace,
                             lambda p: match_label_selector({"matchLabels": selector},
                                                            p["metadata"].get("labels") or {}))
        for pod in pods:
            if not _pod_ready(pod):
                continue
            port_num = _container_port(pod, svc_port.get("targetPort", svc_port.get("port")))
            if port_num is not None:
                out.append((pod["metadata"]["name"], port_num))
        return out

    def service(self, namespace: str, spec: str, rest: str, request: Request, *,
                forward_auth: bool = False) -> Response:
        """Proxy to a service (any method); 503 when no ready endpoint serves the port. The API server never
        forwards the Authorization header (it authenticated the caller with it); a load balancer does
        (`forward_auth`)."""
        _, name, port = parse_proxy_name(spec)
        try:
            service = self.runtime.store.get(core("services"), namespace, name)
        except NotFoundError as err:
            raise not_found(core("services"), name) from err
        ports = (service.get("spec") or {}).get("ports") or []
        if port:
            svc_port = next((p for p in ports if p.get("name") == port or str(p.get("port")) == port), None)
        else:
            svc_port = ports[0] if ports else None
        if svc_port is None:
            raise ApiError(503, f'no endpoints available for service "{spec}"', "ServiceUnavailable")
        candidates = self._candidates(namespace, service, svc_port)
        handlers = [(pod, p, self.runtime.pod_http.lookup(namespace, pod, p)) for pod, p in candidates]
        live = [(pod, p, h) for pod, p, h in handlers if h is not None]
        if not live:
            raise ApiError(503, f'no endpoints available for service "{spec}"', "ServiceUnavailable")
        _, _, handler = live[next(self._turn) % len(live)]
        return self._call(handler, rest, request, forward_auth=forward_auth)

    def pod(self, namespace: str, spec: str, rest: str, request: Request) -> Response:
        """Proxy to one pod's port."""
        _, name, port = parse_proxy_name(spec)
        try:
            pod = self.runtime.store.get(core("pods"), namespace, name)
        except NotFoundError as err:
            raise not_found(core("pods"), name) from err
        if not port:
            ports = [p for c in (pod.get("spec") or {}).get("containers") or [] for p in c.get("ports") or []]
            port = str(ports[0]["containerPort"]) if ports else "80"
        number = _container_port(pod, port)
        handler = self.runtime.pod_http.lookup(namespace, name, number) if number is not None else None
        if handler is None:
            raise ApiError(503, f'error trying to reach service: pod "{name}" does not serve port {port}',
                           "ServiceUnavailable")
        return self._call(handler, rest, request)

    @staticmethod
    def _call(handler: Any, rest: str, request: Request, *, forward_auth: bool = False) -> Response:
        query = urlencode(request.query, doseq=True)
        headers = {k: v for k, v in request.headers.items()
                   if k not in _HOP_HEADERS or (forward_auth and k == "authorization")}
        answer = handler(request.method, "/" + rest.lstrip("/"), query, headers, request.body)
        out_headers = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_HEADERS
                       and k.lower() != "content-type"}
        content_type = next((v for k, v in answer.headers.items() if k.lower() == "content-type"),
                            "application/octet-stream")
        return Response(answer.status, answer.body, content_type, out_headers)
