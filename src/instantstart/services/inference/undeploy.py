"""inference_undeploy: remove a model server (with the routers and KEDA autoscalers on it), a router, or only
the autoscaler of a model server's workers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import InvalidInput
from instantstart.kube import core_kinds, custom_objects, wire
from instantstart.kube.apply import delete_object
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

KEDA_CRD = "scaledobjects.keda.sh"
GONE_TIMEOUT = 900


class UndeployRequest(WireModel):
    """What to remove."""

    deployment_name: str = Field(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
                                 description="A model server (inference_deploy_container) or a router "
                                 "(inference_router_deploy).")
    scope: Literal["all", "autoscaling"] = Field(
        default="all", description="all: the deployment with everything on it (a model server's Service, token "
        "Secret, model-pool Services, the routers in front of it and its KEDA ScaledObjects; a router's "
        "Deployment, Service and RBAC). autoscaling: only the KEDA ScaledObjects on the workers (their replicas "
        "stay where they are).")
    namespace: KubeName = "default"
    cluster_tag: ClusterTag | None = None


class UndeployParams(ParamsModel):
    """What undeploy records: the objects to delete, and whose pods must be gone."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    namespace: str
    objects: list[dict[str, str]]
    pods_of: list[str]


def _ref(api_version: str, kind: str, name: str) -> dict[str, str]:
    return {"apiVersion": api_version, "kind": kind, "name": name}


def router_objects(name: str) -> list[dict[str, str]]:
    """The five objects of a router (what manifests/router.objects creates)."""
    return [
        _ref(o["apiVersion"], o["kind"], o["metadata"]["name"])
        for o in router_manifests.objects(
            router_manifests.RouterSpec(
                name=name, namespace="-", workers="-", worker_port=1, policy="-", image="-", model=None
            )
        )
    ]


def _scalers(api: Api, name: str, namespace: str) -> list[dict[str, str]]:
    """The KEDA ScaledObjects whose target is the Deployment `name` (none when KEDA is not installed)."""
    crds = kube_call("list CRDs", core_kinds.list_crds, api, field_selector=f"metadata.name={KEDA_CRD}")
    if not wire.items(crds):
        return []
    found = kube_call("list ScaledObjects", custom_objects.list_custom, api,
                      "keda.sh", "v1alpha1", "scaledobjects", namespace)
    return [_ref("keda.sh/v1alpha1", "ScaledObject", so["metadata"]["name"]) for so in wire.items(found)
            if ((so.get("spec") or {}).get("scaleTargetRef") or {}).get("name") == name
            and ((so.get("spec") or {}).get("scaleTargetRef") or {}).get("kind", "Deployment") == "Deployment"]


def _pool_services(api: Api, pool: str, namespace: str) -> list[dict[str, str]]:
    listed = kube_call(
        "list services",
        core_kinds.list_services, api,
        namespace,
        label_selector=f"{inference_manifests.LABEL_APP}={pool},{inference_manifests.LABEL_COMPONENT}={inference_manifests.POOL_SERVICE}",
    )
    return [_ref("v1", "Service", wire.name(s)) for s in wire.items(listed)]


def plan(api: Api, req: UndeployRequest) -> tuple[list[dict[str, str]], list[str]]:
    """(objects to delete, deployments whose pods must be gone) for a request; InvalidInput when there is
    nothing of that name to remove."""
    dep = model_server(api, req.deployment_name, req.namespace)
    name = req.deployment_name
    is_router = wire.labels(dep).get(inference_manifests.LABEL_COMPONENT) == router_manifests.COMPONENT
    scalers = _scalers(api, name, req.namespace)
    if req.scope == "autoscaling":
        if not scalers:
            raise InvalidInput(f"Invalid input: deploymentName: no KEDA ScaledObject targets {req.namespace}/{name}",
                               hint="inference_autoscaling_apply creates one; scope=all removes the deployment.",
                               details={"fields": [{"field": "deploymentName", "message": "no autoscaler"}]})
        return scalers, []
    if is_router:
        return [*scalers, *router_objects(name)], [name]
    routers = routers_of(api, name, req.namespace)
    objects = [
        *scalers,
        *[o for router in routers for o in router_objects(router)],
        *_pool_services(api, name, req.namespace),
        _ref("apps/v1", "Deployment", name),
        _ref("v1", "Service", inference_manifests.service_name(name)),
        _ref("v1", "Secret", inference_manifests.token_secret_name(name)),
        _ref("v1", "Secret", inference_manifests.api_key_secret_name(name)),
    ]
    return objects, [name, *routers]


def _check(app: AppContext, req: UndeployRequest) -> UndeployParams:
    row = cluster_row(app, req.cluster_tag)
    objects, pods_of = plan(kube_api(app.kube, row.eks_cluster_name, row.region), req)
    return UndeployParams(cluster_tag=row.tag, region=row.region, eks_cluster=row.eks_cluster_name,
                          name=req.deployment_name, namespace=req.namespace, objects=objects, pods_of=pods_of)


@operation(
    "inference_undeploy",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/inference/deployments/delete",
    completion="operation_get",
    example={"deploymentName": "vllm-model"},
)
async def inference_undeploy(ctx: CallContext, req: UndeployRequest) -> OperationRef:
    """Remove a model server with everything on it: its Deployment (pods and GPUs released), Service, token
    Secret, model-pool Services, the SGLang routers in front of it and the KEDA ScaledObjects scaling it. Given a
    router, removes only the router (Deployment, Service, RBAC). scope=autoscaling removes only the KEDA
    ScaledObjects on the workers. Only what this control plane deployed; finished when the pods are gone."""
    params = await blocking(_check, ctx.app, req)
    return await submit_for_cluster(ctx, "inference_undeploy", params.cluster_tag, params,
                                    status_tool="operation_get", poll_after_seconds=5)


def _delete(api: Api, p: UndeployParams) -> list[str]:
    deleted = []
    for ref in p.objects:
        body = {"apiVersion": ref["apiVersion"], "kind": ref["kind"],
                "metadata": {"name": ref["name"], "namespace": p.namespace}}
        if kube_call(f"delete the {ref['kind']} {ref['name']}", delete_object, api, body):
            deleted.append(f"{ref['kind']}/{ref['name']}")
    return deleted


def _pods_left(api: Api, p: UndeployParams) -> tuple[bool, str]:
    left = []
    for name in p.pods_of:
        pods = kube_call("list pods", core_kinds.list_pods, api, p.namespace,
                         label_selector=f"{inference_manifests.LABEL_APP}={name}")
        left += [wire.name(pod) for pod in wire.items(pods)]
    return not left, f"pods still terminating: {', '.join(sorted(left))}" if left else "pods gone"


async def stage_undeploy(stage: StageContext) -> dict[str, Any]:
    """Delete the planned objects (what is already gone counts as deleted), then wait for the pods to go."""
    p = stage.params_as(UndeployParams)
    api = await blocking(kube_api, stage.app.kube, p.eks_cluster, p.region)
    deleted = await blocking(_delete, api, p)
    await stage.progress(f"deleted {', '.join(deleted) or 'nothing (already gone)'}")

    async def gone() -> tuple[bool, str]:
        return await blocking(_pods_left, api, p)

    await wait_until(stage, gone, limit_seconds=GONE_TIMEOUT, what=f"the pods of {p.name}")
    return {"name": p.name, "namespace": p.namespace, "deleted": deleted,
            "planned": [f"{o['kind']}/{o['name']}" for o in p.objects]}


KINDS.register(OperationKind(name="inference_undeploy", params=UndeployParams,
                             stages=(StageSpec("delete", stage_undeploy, max_attempts=3,
                                               timeout_seconds=GONE_TIMEOUT + 120),)))
