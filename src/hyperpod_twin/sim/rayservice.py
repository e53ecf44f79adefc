"""KubeRay RayService: a RayCluster plus head/serve Services, and simulated Ray Serve applications."""

from __future__ import annotations

import copy
import json
from collections.abc import Hashable, Iterable
from typing import Any

import yaml

from hyperpod_twin.kube.runtime import ProxyResponse
from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import PODS, SERVICES, TypeKey, nsname
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.model_server import SIMULATED, ModelServer
from hyperpod_twin.sim.ray import CLUSTER_LABEL, PORTS, RAYCLUSTERS, TYPE_LABEL

RAYSERVICES: TypeKey = ("ray.io", "rayservices")
SERVE_PORT = PORTS["serve"]


def serve_applications(service: Obj) -> list[Obj]:
    """The applications of spec.serveConfigV2 (a YAML string); [] when absent or unreadable."""
    text = (service.get("spec") or {}).get("serveConfigV2") or ""
    try:
        config = yaml.safe_load(text) if text else {}
    except yaml.YAMLError:
        return []
    apps = (config or {}).get("applications") if isinstance(config, dict) else None
    return [a for a in apps or [] if isinstance(a, dict)]


def _find_model_id(value: Any) -> str | None:
    """A model id anywhere in an application's args (Ray Serve LLM: llm_configs[].model_loading_config)."""
    if isinstance(value, dict):
        for key in ("model_id", "model_source", "model"):
            if isinstance(value.get(key), str):
                return str(value[key])
        for child in value.values():
            found = _find_model_id(child)
            if found:
                return found
    if isinstance(value, list):
        for child in value:
            found = _find_model_id(child)
            if found:
                return found
    return None


class RayServeHandler:
    """What the serve port of a RayService answers: an OpenAI-style API for LLM apps, a simulated JSON
    answer for any other route prefix, and Serve's own /-/routes and /-/healthz."""

    def __init__(self, apps: list[Obj], wall: Any) -> None:
        self.routes = {str(a.get("route_prefix", "/")): str(a.get("name", "app")) for a in apps}
        model = next((m for m in (_find_model_id(a.get("args")) for a in apps) if m), None)
        self.llm = ModelServer("ray-serve", model, wall) if model else None

    def __call__(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> ProxyResponse:
        route = "/" + path.lstrip("/")
        if route == "/-/healthz":
            return ProxyResponse(200, b"success", {"Content-Type": "text/plain"})
        if route == "/-/routes":
            return ProxyResponse(200, json.dumps(self.routes).encode())
        if self.llm is not None and route.startswith("/v1/"):
            return self.llm(method, route, query, headers, body)
        prefix = max((p for p in self.routes if route.startswith(p.rstrip("/") or "/")), key=len, default=None)
        if prefix is None:
            return ProxyResponse(404, b'{"detail": "Path not found"}')
        answer = {
            "application": self.routes[prefix],
            "route": route,
            "result": f"{SIMULATED} Ray Serve application {self.routes[prefix]}",
        }
        return ProxyResponse(200, json.dumps(answer).encode())


class RayServiceController(Controller):
    """A RayService gets a RayCluster `<name>-raycluster-<suffix>` from rayClusterConfig, Services
    `<name>-head-svc` and `<name>-serve-svc` (port 8000), and once the cluster is ready its head pod
    serves the serveConfigV2 applications; status reports serviceStatus Running and app statuses."""

    watches = (RAYSERVICES, RAYCLUSTERS, PODS)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        obj = event.object
        ns = obj["metadata"].get("namespace", "default")
        if event.rtype.key == RAYSERVICES:
            return super().keys_for(event)
        if event.rtype.key == RAYCLUSTERS:
            ref = kobj.controller_of(obj)
            return [(ns, ref["name"])] if ref and ref.get("kind") == "RayService" else []
        cluster = (obj["metadata"].get("labels") or {}).get(CLUSTER_LABEL)
        if not cluster or (obj["metadata"].get("labels") or {}).get(TYPE_LABEL) != "head":
            return []
        rc = self.sim.get(RAYCLUSTERS, ns, cluster)
        ref = kobj.controller_of(rc) if rc else None
        return [(ns, ref["name"])] if ref and ref.get("kind") == "RayService" else []

    def resync_keys(self) -> Iterable[Hashable]:
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in self.sim.list(RAYSERVICES)]

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        service = self.sim.get(RAYSERVICES, ns, name)
        if service is None or service["metadata"].get("deletionTimestamp"):
            return
        spec = service.get("spec") or {}
        cluster_spec = copy.deepcopy(spec.get("rayClusterConfig") or {})
        owned = self.sim.owned(RAYCLUSTERS, service)
        cluster = owned[0] if owned else None
        if cluster is None:
            cluster = self.sim.create(
                RAYCLUSTERS,
                {
                    "metadata": {
                        "generateName": f"{name}-raycluster-",
                        "namespace": ns,
                        "labels": {"ray.io/originated-from-crd": "RayService", "ray.io/originated-from-cr-name": name},
                        "ownerReferences": [kobj.owner_ref(service)],
                    },
                    "spec": cluster_spec,
                },
            )
        elif cluster.get("spec") != cluster_spec:
            cluster["spec"] = cluster_spec
            cluster["metadata"].pop("resourceVersion", None)
            cluster = self.sim.update(RAYCLUSTERS, cluster)
        if cluster is None:
            return
        cname = cluster["metadata"]["name"]
        head_selector = {CLUSTER_LABEL: cname, TYPE_LABEL: "head"}
        self._ensure_service(
            service,
            f"{name}-head-svc",
            head_selector,
            [{"name": n, "port": p, "targetPort": p} for n, p in PORTS.items()],
        )
        self._ensure_service(
            service,
            f"{name}-serve-svc",
            head_selector,
            [{"name": "serve", "port": SERVE_PORT, "targetPort": SERVE_PORT}],
        )
        ready = (cluster.get("status") or {}).get("state") == "ready"
        apps = serve_applications(service)
        if ready:
            for pod in self.sim.list(PODS, ns):
                labels = pod["metadata"].get("labels") or {}
                if labels.get(CLUSTER_LABEL) == cname and labels.get(TYPE_LABEL) == "head" and kobj.pod_is_ready(pod):
                    self.sim.runtime.pod_http.register(
                        ns, pod["metadata"]["name"], SERVE_PORT, RayServeHandler(apps, self.sim.clock.wall)
                    )
        self._status(service, cluster, apps, ready)

    def _ensure_service(self, owner: Obj, name: str, selector: dict[str, str], ports: list[Obj]) -> None:
        ns = owner["metadata"]["namespace"]
        current = self.sim.get(SERVICES, ns, name)
        if current is None:
            self.sim.create(
                SERVICES,
                {
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "labels": {"ray.io/serve": owner["metadata"]["name"]},
                        "ownerReferences": [kobj.owner_ref(owner)],
                    },
                    "spec": {"type": "ClusterIP", "selector": selector, "ports": ports},
                },
            )
        elif current["spec"].get("selector") != selector:
            current["spec"]["selector"] = selector
            current["metadata"].pop("resourceVersion", None)
            self.sim.update(SERVICES, current)

    def _status(self, service: Obj, cluster: Obj, apps: list[Obj], ready: bool) -> None:
        now = self.sim.now()
        status = copy.deepcopy(service.get("status") or {})
        app_status = {
            str(a.get("name", "app")): {
                "status": "RUNNING" if ready else "DEPLOYING",
                "healthLastUpdateTime": now,
                "serveDeploymentStatuses": {
                    str(d.get("name")): {"status": "HEALTHY" if ready else "UPDATING", "healthLastUpdateTime": now}
                    for d in a.get("deployments") or []
                    if isinstance(d, dict) and d.get("name")
                },
            }
            for a in apps
        }
        status.update(
            {
                "serviceStatus": "Running" if ready else "",
                "numServeEndpoints": 1 if ready else 0,
                "observedGeneration": service["metadata"].get("generation", 1),
                "activeServiceStatus": {
                    "rayClusterName": cluster["metadata"]["name"],
                    "rayClusterStatus": copy.deepcopy(cluster.get("status") or {}),
                    "applicationStatuses": app_status,
                },
            }
        )
        if not status["serviceStatus"]:
            status.pop("serviceStatus")
        kobj.set_condition(
            status, "Ready", "True" if ready else "False", now, "NonZeroServeEndpoints" if ready else "Initializing"
        )
        kobj.set_condition(
            status, "UpgradeInProgress", "False", now, "NoActiveCluster" if not ready else "NoPendingCluster"
        )
        self.sim.patch_status(RAYSERVICES, service, status, volatile=("healthLastUpdateTime",))
