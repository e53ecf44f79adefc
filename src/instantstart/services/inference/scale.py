"""inference_scale: change a model server's replicas; scale-in never removes pool workers bound to a service."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, NotFound, PreconditionFailed
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.kube.wire import Obj
from instantstart.manifests import inference as inference_manifests
from instantstart.manifests.labels import INSTANCE_TYPE_LABEL
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.cluster_status import collect_status
from instantstart.services.base.registry import submit_for_cluster
from instantstart.services.inference.placement import place
from instantstart.services.inference.pool import business, workers
from instantstart.services.inference.services import cluster_row
from instantstart.validation import ClusterTag, KubeName

READY_TIMEOUT = 3600


class ScaleRequest(WireModel):
    """The model server and the replicas it should have."""

    deployment_name: str = Field(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
    replicas: int = Field(ge=0, le=64, description="Replicas wanted (0 keeps the Deployment, stops its pods).")
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


class ScaleParams(ParamsModel):
    """What inference_scale records."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    namespace: str
    replicas: int


def model_server(api: Api, name: str, namespace: str) -> Obj:
    """A Deployment made by this control plane; InvalidInput otherwise."""
    dep: Obj | None
    try:
        dep = kube_call("read the Deployment", core_kinds.read_deployment, api, name, namespace)
    except NotFound:
        dep = None
    if dep is None or wire.labels(dep).get(inference_manifests.LABEL_MANAGED) != inference_manifests.MANAGED_BY:
        raise InvalidInput(f"Invalid input: deploymentName: no model server {namespace}/{name}",
                           hint="inference_list_services lists the model servers this control plane deployed.",
                           details={"fields": [{"field": "deploymentName", "message": "not deployed"}]})
    return dep


def bound_guard(api: Api, dep: Obj, replicas: int) -> None:
    """Refuse a scale-in of a model pool that would have to remove workers still serving a service."""
    if wire.labels(dep).get(inference_manifests.LABEL_BUSINESS) != inference_manifests.UNASSIGNED:
        return
    pods = workers(api, wire.namespace(dep), wire.name(dep))
    bound = [p for p in pods if business(p) != inference_manifests.UNASSIGNED]
    remove = len(pods) - replicas
    if remove <= 0 or replicas >= len(bound):
        return
    names = ", ".join(f"{wire.name(p)} (service {business(p)})" for p in bound)
    services = " ".join(sorted({business(p) for p in bound}))
    raise PreconditionFailed(
        f"Scaling {wire.name(dep)} to {replicas} would remove {remove} worker(s), but only "
        f"{len(pods) - len(bound)} are unassigned; still bound to a service: {names}.",
        hint=f"Release them first (inference_pool_release service=<{services}>), or keep replicas >= {len(bound)}.",
        details={"replicas": replicas, "bound": [wire.name(p) for p in bound]},
    )


def _instance_types(dep: Obj) -> list[str] | None:
    template = wire.section(wire.spec(dep), "template")
    affinity = wire.section(wire.spec(template), "affinity")
    required = wire.section(wire.section(affinity, "nodeAffinity"),
                               "requiredDuringSchedulingIgnoredDuringExecution")
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == INSTANCE_TYPE_LABEL and expr.get("operator") == "In":
                return list(expr.get("values") or [])
    return None


def _check(app: AppContext, req: ScaleRequest) -> tuple[ScaleParams, int, int, list[str] | None]:
    row = cluster_row(app, req.cluster_tag)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    dep = model_server(api, req.deployment_name, req.namespace)
    bound_guard(api, dep, req.replicas)
    gpus = int(wire.annotations(dep).get(inference_manifests.ANNOTATION_GPUS, "0") or 0)
    params = ScaleParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name,
                         name=req.deployment_name, namespace=req.namespace, replicas=req.replicas)
    return params, wire.replicas(dep), gpus, _instance_types(dep)


@operation(
    "inference_scale",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/inference/deployments/scale",
    completion="operation_get",
    example={"deploymentName": "vllm-model", "replicas": 2},
)
async def inference_scale(ctx: CallContext, req: ScaleRequest) -> OperationRef:
    """Set a model server's replicas (a Deployment made by inference_deploy_container); finished when that
    many replicas are Ready and no extra pod is left. Scale-out is refused when the new replicas' GPUs are not
    free. For a model pool, scale-in removes only unassigned workers and is refused, naming them, when it would
    have to remove workers still bound to a service (release them with inference_pool_release first)."""
    params, current, gpus, types = await blocking(_check, ctx.app, req)
    if req.replicas > current and gpus > 0:
        status = await collect_status(ctx.app, params.cluster_tag, ())
        place(status, types, gpus, req.replicas - current)
    return await submit_for_cluster(ctx, "inference_scale", params.cluster_tag, params,
                                    status_tool="operation_get", poll_after_seconds=5)


def _scale(api: Api, p: ScaleParams) -> int:
    dep = model_server(api, p.name, p.namespace)
    bound_guard(api, dep, p.replicas)
    kube_call("scale the Deployment", core_kinds.patch_deployment, api, p.name, p.namespace,
              {"spec": {"replicas": p.replicas}})
    return wire.replicas(dep)


def _settled(api: Api, p: ScaleParams) -> tuple[bool, str]:
    dep = model_server(api, p.name, p.namespace)
    ready = wire.ready_replicas(dep)
    live = len(workers(api, p.namespace, p.name))
    return ready >= p.replicas and live == p.replicas, f"{p.name}: {ready}/{p.replicas} Ready, {live} pod(s)"


async def stage_scale(stage: StageContext) -> dict[str, Any]:
    """Patch spec.replicas (bound pool workers carry a high pod-deletion-cost, so unassigned ones go first),
    then wait until the count is reached."""
    p = stage.params_as(ScaleParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)
    before = await blocking(_scale, api, p)
    await stage.progress(f"{p.name}: replicas {before} -> {p.replicas}")

    async def settled() -> tuple[bool, str]:
        return await blocking(_settled, api, p)

    await wait_until(stage, settled, limit_seconds=READY_TIMEOUT, what=f"{p.name} at {p.replicas} replica(s)")
    pods = await blocking(workers, api, p.namespace, p.name)
    return {"name": p.name, "namespace": p.namespace, "replicasBefore": before, "replicas": p.replicas,
            "pods": [{"pod": wire.name(w), "uid": wire.uid(w), "service": business(w)} for w in pods]}


KINDS.register(OperationKind(
    name="inference_scale", params=ScaleParams,
    stages=(StageSpec("scale", stage_scale, max_attempts=2, timeout_seconds=READY_TIMEOUT + 300),),
))
