"""inference_router_deploy: an SGLang router in front of a model server's workers (discovered by label)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput
from instantstart.kube import core_kinds, wire
from instantstart.kube.apply import apply_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests import inference as inference_manifests
from instantstart.manifests import router as router_manifests
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import submit_for_cluster
from instantstart.services.inference.scale import model_server
from instantstart.services.inference.services import cluster_row
from instantstart.validation import ClusterTag, KubeName


class RouterRequest(WireModel):
    """Which workers the router fronts and how it picks one."""

    deployment_name: str = Field(pattern=r"^[a-z]([-a-z0-9]{0,45}[a-z0-9])?$",
                                 description="The workers (a Deployment made by inference_deploy_container).")
    router_name: str | None = Field(default=None, pattern=r"^[a-z]([-a-z0-9]{0,45}[a-z0-9])?$",
                                    description="Default <deploymentName>-router; its Service is <name>-service.")
    policy: Literal["cache_aware", "round_robin", "random", "power_of_two"] = "cache_aware"
    image: str = Field(default=router_manifests.ROUTER_IMAGE, min_length=3, max_length=512, pattern=r"^[^\s]+$")
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


class RouterParams(ParamsModel):
    """What the router deploy records."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    namespace: str
    workers: str
    worker_port: int
    policy: str
    image: str
    model: str | None


def routers_of(api: Api, workers: str, namespace: str) -> list[str]:
    """The routers (made by inference_router_deploy) that discover the Deployment `workers`' pods."""
    listed = kube_call(
        "list routers",
        core_kinds.list_deployments, api,
        namespace,
        label_selector=f"{inference_manifests.LABEL_MANAGED}={inference_manifests.MANAGED_BY},{inference_manifests.LABEL_COMPONENT}={router_manifests.COMPONENT}",
    )
    return sorted(
        wire.name(d)
        for d in wire.items(listed)
        if f"{inference_manifests.LABEL_APP}={workers}" in router_manifests.command_of(d)
    )


def _check(app: AppContext, req: RouterRequest) -> RouterParams:
    row = cluster_row(app, req.cluster_tag)
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    dep = model_server(api, req.deployment_name, req.namespace)
    if wire.labels(dep).get(inference_manifests.LABEL_COMPONENT) == router_manifests.COMPONENT:
        raise InvalidInput("Invalid input: deploymentName: that is a router, not model workers",
                           hint="Name the model server's Deployment.",
                           details={"fields": [{"field": "deploymentName", "message": "a router"}]})
    notes = wire.annotations(dep)
    return RouterParams(
        cluster_tag=row.tag,
        region=row.region,
        eks_cluster=row.eks_cluster_name,
        name=req.router_name or f"{req.deployment_name}-router",
        namespace=req.namespace,
        workers=req.deployment_name,
        worker_port=int(notes.get(inference_manifests.ANNOTATION_PORT, "8000")),
        policy=req.policy,
        image=req.image,
        model=notes.get(inference_manifests.ANNOTATION_MODEL),
    )


@operation(
    "inference_router_deploy",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/inference/routers",
    completion="operation_get",
    example={"deploymentName": "vllm-model"},
)
async def inference_router_deploy(ctx: CallContext, req: RouterRequest) -> OperationRef:
    """Put an SGLang router (policy cache_aware by default) in front of a model server's workers: it discovers
    their Ready pods by label in the namespace (a Role lets it read pods), runs on CPU, and is reached through
    <router>-service on port 30000 (inference_call_model service_name=<router>). Finished when it is Ready."""
    params = await blocking(_check, ctx.app, req)
    return await submit_for_cluster(ctx, "inference_router_deploy", params.cluster_tag, params,
                                    status_tool="operation_get", poll_after_seconds=5)


def _spec(p: RouterParams) -> router_manifests.RouterSpec:
    return router_manifests.RouterSpec(name=p.name, namespace=p.namespace, workers=p.workers, worker_port=p.worker_port,
                        policy=p.policy, image=p.image, model=p.model)


def _apply(api: Api, p: RouterParams) -> None:
    for body in router_manifests.objects(_spec(p)):
        kube_call(f"apply the router's {body['kind']}", apply_object, api, body)


def _ready(api: Api, p: RouterParams) -> tuple[bool, str]:
    dep = kube_call("read the router", core_kinds.read_deployment, api, p.name, p.namespace)
    ready = wire.ready_replicas(dep)
    return ready >= 1, f"router {p.name}: {ready}/1 Ready"


async def stage_router(stage: StageContext) -> dict[str, Any]:
    """Apply the router's objects and wait until it is Ready."""
    p = stage.params_as(RouterParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)
    await blocking(_apply, api, p)

    async def ready() -> tuple[bool, str]:
        return await blocking(_ready, api, p)

    await wait_until(stage, ready, limit_seconds=900, what=f"router {p.name}")
    return {
        "name": p.name,
        "namespace": p.namespace,
        "service": inference_manifests.service_name(p.name),
        "workers": p.workers,
        "policy": p.policy,
        "command": router_manifests.command(_spec(p)),
    }


KINDS.register(OperationKind(name="inference_router_deploy", params=RouterParams,
                             stages=(StageSpec("router", stage_router, max_attempts=2, timeout_seconds=1200),)))
