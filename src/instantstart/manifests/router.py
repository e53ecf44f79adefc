"""The SGLang router in front of a model server's workers (service discovery by label), and its RBAC."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from instantstart.manifests import inference as inference_manifests

ROUTER_IMAGE = "lmsysorg/sglang-router:v0.2.1"
ROUTER_PORT = 30000
METRICS_PORT = 29000
RUNNING_METRIC = "sgl_router_running_requests"
COMPONENT = "router"


@dataclass(frozen=True)
class RouterSpec:
    """A router: its name, the workers it discovers, their port, the policy."""

    name: str
    namespace: str
    workers: str
    worker_port: int
    policy: str
    image: str
    model: str | None


def command(spec: RouterSpec) -> list[str]:
    """`python -m sglang_router.launch_router` discovering Ready worker pods by label in one namespace."""
    return ["python3", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--port", str(ROUTER_PORT),
            "--service-discovery", "--selector", f"{inference_manifests.LABEL_APP}={spec.workers}",
            "--service-discovery-port", str(spec.worker_port), "--service-discovery-namespace", spec.namespace,
            "--policy", spec.policy, "--prometheus-host", "0.0.0.0", "--prometheus-port", str(METRICS_PORT)]


def _meta(spec: RouterSpec, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": spec.namespace,
        "labels": {
            inference_manifests.LABEL_APP: spec.name,
            inference_manifests.LABEL_MANAGED: inference_manifests.MANAGED_BY,
            inference_manifests.LABEL_COMPONENT: COMPONENT,
        },
    }


def objects(spec: RouterSpec) -> list[dict[str, Any]]:
    """ServiceAccount, Role (read pods), RoleBinding, Deployment and Service `<name>-service`."""
    notes = {inference_manifests.ANNOTATION_PORT: str(ROUTER_PORT)}
    if spec.model:
        notes[inference_manifests.ANNOTATION_MODEL] = spec.model
    probe = {"httpGet": {"path": "/health", "port": ROUTER_PORT}, "periodSeconds": 10}
    labels = _meta(spec, spec.name)["labels"]
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {**_meta(spec, spec.name), "annotations": notes},
        "spec": {
            "replicas": 1, "selector": {"matchLabels": {inference_manifests.LABEL_APP: spec.name}},
            "template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": spec.name,
                "containers": [{"name": "router", "image": spec.image, "command": command(spec),
                                "ports": [{"name": "http", "containerPort": ROUTER_PORT},
                                          {"name": "metrics", "containerPort": METRICS_PORT}],
                                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                                "readinessProbe": {**probe, "failureThreshold": 3}}],
                "tolerations": [{"key": inference_manifests.GPU, "operator": "Exists", "effect": "NoSchedule"}],
            }},
        },
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(spec, spec.name)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(spec, spec.name),
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta(spec, spec.name),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": spec.name},
         "subjects": [{"kind": "ServiceAccount", "name": spec.name, "namespace": spec.namespace}]},
        deployment,
        {"apiVersion": "v1", "kind": "Service", "metadata": {**_meta(spec, inference_manifests.service_name(spec.name)),
                                                             "annotations": notes},
         "spec": {"type": "ClusterIP", "selector": {inference_manifests.LABEL_APP: spec.name},
                  "ports": [{"name": "http", "port": ROUTER_PORT, "targetPort": ROUTER_PORT, "protocol": "TCP"},
                            {"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT,
                             "protocol": "TCP"}]}},
    ]


def load_query(router: str, namespace: str) -> str:
    """PromQL for the requests a router has in flight across its workers (what autoscaling follows)."""
    return f'sum({RUNNING_METRIC}{{namespace="{namespace}",app_kubernetes_io_name="{router}"}})'


def command_of(deployment: dict[str, Any]) -> list[str]:
    """The router container's command of a live Deployment (its wire dict)."""
    template = (deployment.get("spec") or {}).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or []
    return [str(w) for w in (containers[0].get("command") or [])] if containers else []
