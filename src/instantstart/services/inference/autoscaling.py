"""inference_autoscaling_apply: a KEDA ScaledObject on a model server's worker Deployment (never its router)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.kube import wire
from instantstart.kube.apply import apply_object, read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests import inference as inference_manifests
from instantstart.manifests import router as router_manifests
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import submit_for_cluster
from instantstart.services.inference.router import routers_of
from instantstart.services.inference.scale import model_server
from instantstart.services.inference.services import cluster_row
from instantstart.validation import ClusterTag, KubeName

CRD = "scaledobjects.keda.sh"


class AutoscalingRequest(WireModel):
    """Scale a model server's workers between min and max replicas on a Prometheus query."""

    deployment_name: str = Field(pattern=r"^[a-z]([-a-z0-9]{0,45}[a-z0-9])?$",
                                 description="The worker Deployment (a router is refused).")
    min_replicas: int = Field(default=1, ge=0, le=64)
    max_replicas: int = Field(default=4, ge=1, le=64)
    server_address: str = Field(min_length=8, max_length=512, pattern=r"^https?://[^\s]+$",
                                description="Prometheus (or AMP workspace) URL.")
    query: str | None = Field(default=None, min_length=1, max_length=2000,
                              description="PromQL returning one value. Default: the requests in flight at the "
                              "SGLang router in front of the workers (sum of sgl_router_running_requests); "
                              "required when no router fronts them.")
    threshold: float = Field(gt=0, description="Target value per replica.")
    activation_threshold: float = Field(default=0, ge=0)
    polling_interval: int = Field(default=30, ge=5, le=3600)
    cooldown_period: int = Field(default=300, ge=0, le=86400)
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingRequest:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"minReplicas {self.min_replicas} is above maxReplicas {self.max_replicas}")
        return self


class AutoscalingParams(ParamsModel):
    """What the autoscaling apply records: the rendered ScaledObject."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    namespace: str
    manifest: dict[str, Any]


def scaled_object(req: AutoscalingRequest, query: str) -> dict[str, Any]:
    """The ScaledObject (FACTS §6.5) targeting the worker Deployment."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {
            "name": f"{req.deployment_name}-scaler",
            "namespace": req.namespace,
            "labels": {
                inference_manifests.LABEL_APP: req.deployment_name,
                inference_manifests.LABEL_MANAGED: inference_manifests.MANAGED_BY,
            },
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": req.deployment_name},
            "minReplicaCount": req.min_replicas,
            "maxReplicaCount": req.max_replicas,
            "pollingInterval": req.polling_interval,
            "cooldownPeriod": req.cooldown_period,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": req.server_address,
                        "query": query,
                        "threshold": f"{req.threshold:g}",
                        "activationThreshold": f"{req.activation_threshold:g}",
                    },
                }
            ],
        },
    }


def _check(app: AppContext, req: AutoscalingRequest) -> AutoscalingParams:
    row = cluster_row(app, req.cluster_tag)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    dep = model_server(api, req.deployment_name, req.namespace)
    labels = wire.labels(dep)
    if labels.get(inference_manifests.LABEL_COMPONENT) == router_manifests.COMPONENT:
        workers = next(
            (
                w.split("=", 1)[1]
                for w in router_manifests.command_of(dep)
                if w.startswith(inference_manifests.LABEL_APP + "=")
            ),
            "?",
        )
        raise InvalidInput(
            f"Invalid input: deploymentName: {req.deployment_name} is an SGLang router; autoscaling targets the "
            "workers behind it, never the router",
            hint=f"Use deploymentName={workers} (the workers the router discovers).",
            details={"fields": [{"field": "deploymentName", "message": "a router"}]})
    query = req.query
    if query is None:
        routers = routers_of(api, req.deployment_name, req.namespace)
        if len(routers) != 1:
            raise InvalidInput(
                f"Invalid input: query: {len(routers)} routers front {req.deployment_name}, so there is no "
                "default load metric",
                hint="Give query (PromQL returning one value), or deploy one router with inference_router_deploy.",
                details={"fields": [{"field": "query", "message": "required"}]})
        query = router_manifests.load_query(routers[0], req.namespace)
    if read_object(api, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"name": CRD}}) is None:
        raise PreconditionFailed(f"KEDA is not installed on {row.tag} (no {CRD}).",
                                 hint='Enable KEDA first: hyperpod_update_advanced_features {"keda": {"enabled": '
                                 'true}}, then apply the autoscaling again.')
    return AutoscalingParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name,
                             name=f"{req.deployment_name}-scaler", namespace=req.namespace,
                             manifest=scaled_object(req, query))


@operation(
    "inference_autoscaling_apply",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/inference/autoscaling",
    completion="operation_get",
    example={"deploymentName": "vllm-model", "serverAddress": "http://prometheus.monitoring:9090",
             "query": "sum(vllm:num_requests_waiting)", "threshold": 5},
)
async def inference_autoscaling_apply(ctx: CallContext, req: AutoscalingRequest) -> OperationRef:
    """Autoscale a model server's worker Deployment with KEDA (a ScaledObject with a Prometheus trigger,
    between minReplicas and maxReplicas), by default on the requests in flight at the SGLang router in front of
    the workers. A router is refused: the workers behind it are what scales.
    Finished when KEDA reports the ScaledObject Ready. Needs KEDA (cluster dependencies)."""
    params = await blocking(_check, ctx.app, req)
    return await submit_for_cluster(ctx, "inference_autoscaling_apply", params.cluster_tag, params,
                                    status_tool="operation_get", poll_after_seconds=5)


def _ready(api: Api, p: AutoscalingParams) -> tuple[bool, str]:
    found = read_object(api, {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                              "metadata": {"name": p.name, "namespace": p.namespace}})
    for cond in ((found or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True", f"{p.name}: Ready={cond.get('status')} {cond.get('message', '')}"
    return False, f"{p.name}: not reconciled yet"


async def stage_apply(stage: StageContext) -> dict[str, Any]:
    """Apply the ScaledObject and wait for KEDA's Ready condition."""
    p = stage.params_as(AutoscalingParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)
    await blocking(kube_call, "apply the ScaledObject", apply_object, api, p.manifest)

    async def ready() -> tuple[bool, str]:
        return await blocking(_ready, api, p)

    await wait_until(stage, ready, limit_seconds=300, what=f"ScaledObject {p.name}")
    spec = p.manifest["spec"]
    return {"name": p.name, "namespace": p.namespace, "target": spec["scaleTargetRef"]["name"],
            "minReplicas": spec["minReplicaCount"], "maxReplicas": spec["maxReplicaCount"]}


KINDS.register(OperationKind(name="inference_autoscaling_apply", params=AutoscalingParams,
                             stages=(StageSpec("apply", stage_apply, max_attempts=3),)))
