"""What a feature has right now on the cluster: its add-on or release, CRDs served, controllers Ready."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from instantstart.aws import eks as eks_api
from instantstart.context import AppContext
from instantstart.errors import DependencyFailed
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api, api_status
from instantstart.operations.waiting import blocking
from instantstart.store.models import ClusterRow

READY_SECONDS = 300

# Per feature: CRDs that must be served and Deployments (namespace, name) that must be Ready.
CHECKS: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {
    "certManager": ((), (("cert-manager", "cert-manager"), ("cert-manager", "cert-manager-webhook"))),
    "fsxCsiDriver": ((), (("kube-system", "fsx-csi-controller"),)),
    "trainingOperator": (
        ("hyperpodpytorchjobs.sagemaker.amazonaws.com",),
        (("aws-hyperpod", "hp-training-operator-controller-manager"),),
    ),
    "inferenceOperator": (
        ("inferenceendpointconfigs.inference.sagemaker.aws.amazon.com",),
        (("hyperpod-inference-system", "hyperpod-inference-controller-manager"),),
    ),
    "kuberayOperator": ((), (("ray-system", "kuberay-operator"),)),
    "observability": ((), (("hyperpod-observability", "hyperpod-observability-operator"),)),
    "keda": (("scaledobjects.keda.sh",), (("keda", "keda-operator"), ("keda", "keda-operator-metrics-apiserver"))),
    "taskGovernance": (
        ("clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io"),
        (("kueue-system", "kueue-controller-manager"),),
    ),
}


def _crd_served(api: Api, name: str) -> tuple[bool, str]:
    try:
        crd = core_kinds.read_crd(api, name)
    except Exception as exc:
        if api_status(exc) == 404:
            return False, "not installed"
        raise
    conditions = {c.get("type"): c.get("status") for c in wire.conditions(crd)}
    served = any(v.get("served") for v in wire.spec(crd).get("versions") or [])
    ok = served and conditions.get("Established") == "True"
    return ok, "served and Established" if ok else f"served={served}, Established={conditions.get('Established')}"


def _deployment_ready(api: Api, namespace: str, name: str) -> tuple[bool, str]:
    try:
        dep = core_kinds.read_deployment(api, name, namespace)
    except Exception as exc:
        if api_status(exc) == 404:
            return False, "not found"
        raise
    want = wire.replicas(dep, default=1)
    have = wire.ready_replicas(dep)
    return have >= want and want > 0, f"{have}/{want} ready"


def kube_checks(app: AppContext, row: ClusterRow, key: str) -> dict[str, Any]:
    """CRDs and controllers of a feature, each with ok and why (blocking)."""
    crds, deployments = CHECKS.get(key, ((), ()))
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    out: dict[str, Any] = {"crds": [], "controllers": []}
    for name in crds:
        ok, why = kube_call(f"read CRD {name}", _crd_served, api, name)
        out["crds"].append({"name": name, "served": ok, "why": why})
    for namespace, name in deployments:
        ok, why = kube_call(f"read Deployment {namespace}/{name}", _deployment_ready, api, namespace, name)
        out["controllers"].append({"namespace": namespace, "name": name, "ready": ok, "why": why})
    out["ready"] = all(c["served"] for c in out["crds"]) and all(c["ready"] for c in out["controllers"])
    return out


def addon_state(app: AppContext, row: ClusterRow, addon: str) -> dict[str, Any]:
    """The add-on's status, version and health issues (NOT_INSTALLED when absent)."""
    found = eks_api.describe_addon(app.aws, row.region, row.eks_cluster_name, addon)
    if found is None:
        return {"name": addon, "status": "NOT_INSTALLED"}
    issues = [f"{i.get('code')}: {i.get('message')}" for i in (found.get("health") or {}).get("issues") or []]
    return {"name": addon, "status": found.get("status"), "version": found.get("addonVersion"), "issues": issues}


async def verify_feature(app: AppContext, row: ClusterRow, key: str) -> dict[str, Any]:
    """Wait until the feature's CRDs are served and its controllers Ready; retryable DependencyFailed with
    what is missing otherwise."""
    deadline = time.monotonic() + READY_SECONDS
    while True:
        checks = await blocking(kube_checks, app, row, key)
        if checks["ready"]:
            return checks
        if time.monotonic() > deadline:
            missing = [f"CRD {c['name']}: {c['why']}" for c in checks["crds"] if not c["served"]] + [
                f"Deployment {c['namespace']}/{c['name']}: {c['why']}" for c in checks["controllers"] if not c["ready"]
            ]
            raise DependencyFailed(
                f"{key} is installed but not ready: {'; '.join(missing)}",
                hint="Check the controller's pods (events, image pulls, schedulable nodes), then operation_retry.",
                retryable=True,
            )
        await asyncio.sleep(app.settings.poll_seconds)
