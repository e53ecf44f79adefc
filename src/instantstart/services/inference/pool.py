"""Model pool: hand warm `business=unassigned` workers to a service by relabelling them (no restart), and back."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.kube import core_kinds, wire
from instantstart.kube.apply import apply_object, delete_object, read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.kube.wire import Obj
from instantstart.manifests import inference as inference_manifests
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking
from instantstart.services.base.registry import submit_for_cluster
from instantstart.services.inference.services import cluster_row
from instantstart.validation import ClusterTag, KubeName

NAME = r"^[a-z]([-a-z0-9]{0,45}[a-z0-9])?$"


def _invalid(field: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(f"Invalid input: {field}: {message}", hint=hint,
                        details={"fields": [{"field": field, "message": message}]})


def pools(api: Api, namespace: str) -> dict[str, Obj]:
    """The model-pool Deployments of a namespace, by name."""
    selector = (f"{inference_manifests.LABEL_MANAGED}={inference_manifests.MANAGED_BY},"
                f"{inference_manifests.LABEL_BUSINESS}={inference_manifests.UNASSIGNED}")
    found = kube_call("list deployments", core_kinds.list_deployments, api, namespace, label_selector=selector)
    return {wire.name(d): d for d in wire.items(found)}


def pick_pool(api: Api, namespace: str, pool: str | None) -> Obj:
    """The named pool, or the only one in the namespace; InvalidInput lists the choices otherwise."""
    found = pools(api, namespace)
    names = ", ".join(sorted(found)) or "none (deploy one: inference_deploy_container serviceType=modelpool)"
    if pool is not None:
        if pool not in found:
            raise _invalid("pool", f"no model pool {namespace}/{pool}", f"Model pools here: {names}.")
        return found[pool]
    if len(found) != 1:
        raise _invalid("pool", f"{len(found)} model pools in {namespace}; name one", f"Model pools here: {names}.")
    return next(iter(found.values()))


def workers(api: Api, namespace: str, pool: str) -> list[Obj]:
    """The pool's live pods (not being deleted), by name."""
    found = kube_call(
        "list pods", core_kinds.list_pods, api, namespace, label_selector=f"{inference_manifests.LABEL_APP}={pool}"
    )
    live = [p for p in wire.items(found) if not wire.deleting(p)]
    return sorted(live, key=wire.name)


def business(pod: Obj) -> str:
    """The service a worker serves (`unassigned` when warm and free)."""
    return str(wire.labels(pod).get(inference_manifests.LABEL_BUSINESS, inference_manifests.UNASSIGNED))


def is_ready(pod: Obj) -> bool:
    """The pod passes its readiness probe."""
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in wire.conditions(pod))


def _relabel(api: Api, pod: Obj, service: str) -> dict[str, Any]:
    """Change only the pod's `business` label (and its deletion cost): the container keeps running."""
    cost = inference_manifests.BOUND_DELETION_COST if service != inference_manifests.UNASSIGNED else None
    body = {
        "metadata": {
            "labels": {inference_manifests.LABEL_BUSINESS: service},
            "annotations": {inference_manifests.DELETION_COST: cost},
        }
    }
    patched = kube_call("relabel the worker", core_kinds.patch_pod, api, wire.name(pod), wire.namespace(pod),
                        body)
    return {"pod": wire.name(patched), "uid": wire.uid(patched), "node": wire.node_name(patched),
            "service": business(patched)}


class AssignRequest(WireModel):
    """Which service gets warm workers, from which pool."""

    service: str = Field(pattern=NAME, description="The service the workers will serve; its Service is "
                         "<service>-service (made when missing, selecting business=<service>).")
    pool: str | None = Field(default=None, pattern=NAME, description="The model-pool deployment (default: the "
                             "only one in the namespace).")
    count: int = Field(default=1, ge=1, le=64, description="How many warm workers to move.")
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


class PoolParams(ParamsModel):
    """What assign and release record."""

    cluster_tag: str
    region: str
    eks_cluster: str
    namespace: str
    pool: str
    service: str
    count: int
    pods: list[str]


class PoolResult(WireModel):
    """Workers moved, each with its pod UID (unchanged: the same pod, no reload)."""

    pool: str
    service: str
    service_name: str
    moved: list[dict[str, Any]]
    unassigned_left: int


def _check_assign(app: AppContext, tag: str, req: AssignRequest) -> PoolParams:
    row = cluster_row(app, tag)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    pool = pick_pool(api, req.namespace, req.pool)
    name = wire.name(pool)
    if req.service == inference_manifests.UNASSIGNED:
        raise _invalid("service", "`unassigned` marks free workers", "Name the service the workers will serve.")
    existing = read_object(
        api,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": inference_manifests.service_name(req.service), "namespace": req.namespace},
        },
    )
    selector = ((existing or {}).get("spec") or {}).get("selector")
    if existing is not None and selector != {inference_manifests.LABEL_BUSINESS: req.service}:
        raise _invalid(
            "service",
            f"{req.namespace}/{inference_manifests.service_name(req.service)} exists and selects {selector}, "
            f"not {inference_manifests.LABEL_BUSINESS}={req.service}",
            "Pick a service name not used by another model.",
        )
    free = [
        p for p in workers(api, req.namespace, name) if business(p) == inference_manifests.UNASSIGNED and is_ready(p)
    ]
    if len(free) < req.count:
        replicas = wire.replicas(pool) + req.count - len(free)
        raise PreconditionFailed(
            f"Model pool {req.namespace}/{name} has {len(free)} warm unassigned worker(s); {req.count} asked.",
            hint=f"Grow the pool (inference_scale deploymentName={name} replicas={replicas}) and wait until "
            "the new workers are Ready, or release workers (inference_pool_release).",
            details={"pool": name, "unassigned": len(free), "count": req.count},
        )
    return PoolParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name,
                      namespace=req.namespace, pool=name, service=req.service, count=req.count, pods=[])


@operation(
    "inference_pool_assign",
    destructive=False,
    idempotent=False,
    method="POST",
    path="/inference/pool/assign",
    completion="operation_get",
    example={"service": "chat", "count": 1},
)
async def inference_pool_assign(ctx: CallContext, req: AssignRequest) -> OperationRef:
    """Move warm workers of a model pool (inference_deploy_container serviceType=modelpool) to a service by
    relabelling them business=<service>: the pods keep running, no weights are reloaded, and the service's
    Service (<service>-service) routes to them at once. Refused when fewer Ready unassigned workers are left.
    Not idempotent: each call moves `count` more workers."""
    tag = (await blocking(cluster_row, ctx.app, req.cluster_tag)).tag
    params = await blocking(_check_assign, ctx.app, tag, req)
    return await submit_for_cluster(ctx, "inference_pool_assign", tag, params, status_tool="operation_get",
                                    poll_after_seconds=2)


def _service_for(api: Api, p: PoolParams, pool: Obj) -> str:
    """Make sure the service's Service exists (a pool's own Service already selects business=<pool>)."""
    name = inference_manifests.service_name(p.service)
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": p.namespace}}
    if read_object(api, body) is None:
        notes = wire.annotations(pool)
        kube_call(
            "make the service's Service",
            apply_object,
            api,
            inference_manifests.pool_service(
                p.service, p.namespace, p.pool, int(notes.get(inference_manifests.ANNOTATION_PORT, "8000")), notes
            ),
        )
    return name


def _assign(app: AppContext, p: PoolParams) -> PoolResult:
    api = kube_api(app.kube, p.eks_cluster, p.region)
    pool = pick_pool(api, p.namespace, p.pool)
    pods = workers(api, p.namespace, p.pool)
    free = [w for w in pods if business(w) == inference_manifests.UNASSIGNED and is_ready(w)]
    if len(free) < p.count:
        raise PreconditionFailed(f"Model pool {p.namespace}/{p.pool} has {len(free)} warm unassigned worker(s) "
                                 f"now; {p.count} asked.", hint="Grow the pool with inference_scale, then retry.")
    service_name = _service_for(api, p, pool)
    moved = [_relabel(api, w, p.service) for w in free[: p.count]]
    return PoolResult(pool=p.pool, service=p.service, service_name=service_name, moved=moved,
                      unassigned_left=len(free) - p.count)


async def stage_assign(stage: StageContext) -> dict[str, Any]:
    """Relabel the workers (the same pods: their UIDs are in the result)."""
    p = stage.params_as(PoolParams)
    result = await blocking(_assign, stage.app, p)
    await stage.progress(f"moved {', '.join(w['pod'] for w in result.moved)} to {p.service}")
    return result.model_dump(mode="json", by_alias=True)


class ReleaseRequest(WireModel):
    """Which service gives its workers back (all of them, or the named pods)."""

    service: str = Field(pattern=NAME)
    pods: list[str] | None = Field(default=None, max_length=64, description="Default: every worker of the service.")
    pool: str | None = Field(default=None, pattern=NAME)
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


def _check_release(app: AppContext, tag: str, req: ReleaseRequest) -> PoolParams:
    row = cluster_row(app, tag)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    pool = wire.name(pick_pool(api, req.namespace, req.pool))
    bound = [wire.name(w) for w in workers(api, req.namespace, pool) if business(w) == req.service]
    unknown = sorted(set(req.pods or []) - set(bound))
    if unknown:
        raise _invalid("pods", f"{', '.join(unknown)} do(es) not serve {req.service}",
                       f"Workers of {req.service}: {', '.join(bound) or 'none'}.")
    pods = sorted(req.pods or bound)
    return PoolParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name,
                      namespace=req.namespace, pool=pool, service=req.service, count=len(pods), pods=pods)


@operation(
    "inference_pool_release",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/inference/pool/release",
    completion="operation_get",
    example={"service": "chat"},
)
async def inference_pool_release(ctx: CallContext, req: ReleaseRequest) -> OperationRef:
    """Give a service's workers back to their model pool (relabelled business=unassigned, still warm, no
    restart). The service's own Service (made by inference_pool_assign) is deleted when it has no worker left."""
    tag = (await blocking(cluster_row, ctx.app, req.cluster_tag)).tag
    params = await blocking(_check_release, ctx.app, tag, req)
    return await submit_for_cluster(ctx, "inference_pool_release", tag, params, status_tool="operation_get",
                                    poll_after_seconds=2)


def _release(app: AppContext, p: PoolParams) -> PoolResult:
    api = kube_api(app.kube, p.eks_cluster, p.region)
    pods = workers(api, p.namespace, p.pool)
    moved = [
        _relabel(api, w, inference_manifests.UNASSIGNED)
        for w in pods
        if wire.name(w) in p.pods and business(w) == p.service
    ]
    left = [w for w in pods if business(w) == p.service and wire.name(w) not in p.pods]
    service_name = inference_manifests.service_name(p.service)
    if not left and p.service != p.pool:
        body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": service_name, "namespace": p.namespace}}
        found = read_object(api, body)
        if (
            found is not None
            and (found["metadata"].get("labels") or {}).get(inference_manifests.LABEL_COMPONENT)
            == inference_manifests.POOL_SERVICE
        ):
            kube_call("delete the service's Service", delete_object, api, body)
    free = sum(1 for w in workers(api, p.namespace, p.pool) if business(w) == inference_manifests.UNASSIGNED)
    return PoolResult(pool=p.pool, service=p.service, service_name=service_name, moved=moved, unassigned_left=free)


async def stage_release(stage: StageContext) -> dict[str, Any]:
    """Relabel the workers business=unassigned (what was already released counts as done)."""
    p = stage.params_as(PoolParams)
    result = await blocking(_release, stage.app, p)
    await stage.progress(f"released {len(result.moved)} worker(s) of {p.service}")
    return result.model_dump(mode="json", by_alias=True)


KINDS.register(OperationKind(name="inference_pool_assign", params=PoolParams,
                             stages=(StageSpec("assign", stage_assign, max_attempts=1),)))
KINDS.register(OperationKind(name="inference_pool_release", params=PoolParams,
                             stages=(StageSpec("release", stage_release, max_attempts=3),)))
