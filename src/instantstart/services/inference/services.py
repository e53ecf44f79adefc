"""Deployed model servers and the SGLang routers in front of them: list them (each with its kind)."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.informers import Informer
from instantstart.kube.wire import Obj, ObjList
from instantstart.manifests import inference as inference_manifests
from instantstart.manifests import router as router_manifests
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.services.base.status_model import WatchFreshness
from instantstart.services.base.watch import watched
from instantstart.services.base.watch.state import memoised
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag, KubeName


class ListRequest(WireModel):
    """Which cluster and namespace (every namespace when absent)."""

    namespace: KubeName | None = None
    cluster_tag: ClusterTag | None = None


class ModelService(WireModel):
    """One deployed model server, or an SGLang router in front of one."""

    name: str
    namespace: str
    kind: Literal["server", "router"] = Field(
        default="server",
        description="server: a model server (inference_deploy_container); router: an SGLang router "
        "(inference_router_deploy), which inference_scale, inference_undeploy and inference_call_model take too.",
    )
    engine: str = Field(description="vllm, sglang or other; sglang-router for a router.")
    model: str | None
    service: str | None
    service_type: str | None
    replicas_ready: int
    replicas_desired: int
    gpus_per_replica: int
    url: str | None = Field(description="In-cluster URL, or the load balancer's when external.")
    load_balancer: str | None = Field(default=None, description="internal or internet-facing (a LoadBalancer "
                                      "Service's scheme annotation); None for an in-cluster Service.")
    source_ranges: list[str] = Field(default_factory=list, description="The CIDRs the load balancer admits.")


class ModelServices(WireModel):
    """The model servers this control plane deployed."""

    cluster_tag: str
    services: list[ModelService]
    count: int
    source: str = Field(default="direct", description=watched.SOURCE_HELP)
    watch: WatchFreshness | None = Field(default=None, description="How current the watched servers are.")
    note: str | None = Field(default=None, description="Why the answer was read directly, or how stale it is.")


def kind_of(labels: dict[str, str]) -> Literal["server", "router"] | None:
    """What a Deployment this control plane labelled is: a model server, a router, or neither (None)."""
    if labels.get(inference_manifests.LABEL_MANAGED) != inference_manifests.MANAGED_BY:
        return None
    if labels.get(inference_manifests.LABEL_COMPONENT) == router_manifests.COMPONENT:
        return "router"
    return "server" if inference_manifests.LABEL_ENGINE in labels else None


def _engine(labels: dict[str, str]) -> str:
    return "sglang-router" if kind_of(labels) == "router" else labels.get(inference_manifests.LABEL_ENGINE, "other")


def _model_service(dep: Obj, svc: Obj | None) -> ModelService:
    notes, labels = wire.annotations(dep), wire.labels(dep)
    url = None
    if svc is not None:
        ports = wire.ports(svc)
        port = ports[0].get("port") if ports else notes.get(inference_manifests.ANNOTATION_PORT)
        ingress = wire.ingress(svc)
        external = (ingress[0].get("hostname") or ingress[0].get("ip")) if ingress else None
        url = _url(wire.name(svc), wire.namespace(dep), port, wire.service_type(svc), external)
    return ModelService(
        name=wire.name(dep),
        namespace=wire.namespace(dep),
        kind=kind_of(labels) or "server",
        engine=_engine(labels),
        model=notes.get(inference_manifests.ANNOTATION_MODEL),
        service=wire.name(svc) if svc is not None else None,
        service_type=wire.service_type(svc) if svc is not None else None,
        replicas_ready=wire.ready_replicas(dep),
        replicas_desired=wire.replicas(dep),
        gpus_per_replica=int(notes.get(inference_manifests.ANNOTATION_GPUS, "0") or 0),
        url=url,
        load_balancer=inference_manifests.load_balancer_scheme(wire.service_type(svc), wire.annotations(svc))
        if svc is not None
        else None,
        source_ranges=list(wire.spec(svc).get("loadBalancerSourceRanges") or []),
    )


def _services(app: AppContext, row: ClusterRow, namespace: str | None) -> list[ModelService]:
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    # Model servers (an engine label) and routers (component=router): one selector cannot say "or", kind_of can.
    selector = f"{inference_manifests.LABEL_MANAGED}={inference_manifests.MANAGED_BY}"
    deps: ObjList
    svcs: ObjList
    if namespace:
        deps = kube_call("list deployments", core_kinds.list_deployments, api, namespace, label_selector=selector)
        svcs = kube_call(
            "list services", core_kinds.list_services, api, namespace, label_selector=inference_manifests.LABEL_MANAGED
        )
    else:
        deps = kube_call("list deployments", core_kinds.list_deployments, api, None, label_selector=selector)
        svcs = kube_call(
            "list services", core_kinds.list_services, api, None, label_selector=inference_manifests.LABEL_MANAGED
        )
    by_name = {(wire.namespace(s), wire.name(s)): s for s in wire.items(svcs)}
    out = [
        _model_service(dep, by_name.get((wire.namespace(dep), inference_manifests.service_name(wire.name(dep)))))
        for dep in wire.items(deps)
        if kind_of(wire.labels(dep))
    ]
    return sorted(out, key=lambda s: (s.namespace, s.name))


def _url(name: str, namespace: str, port: Any, service_type: str | None, external: str | None) -> str:
    if service_type == "LoadBalancer" and external:
        return f"http://{external}:{port}"
    return f"http://{name}.{namespace}.svc.cluster.local:{port}"


def _watched_service(dep: dict[str, Any], svc: dict[str, Any] | None) -> ModelService:
    """ModelService from the watched projections (base.watch.projections), as _model_service from read ones."""
    notes = dep["annotations"]
    url = None
    if svc is not None:
        port = svc["port"] if svc["port"] is not None else notes.get(inference_manifests.ANNOTATION_PORT)
        url = _url(svc["name"], dep["namespace"], port, svc["type"], svc["external"])
    return ModelService(
        name=dep["name"],
        namespace=dep["namespace"],
        kind=kind_of(dep["labels"]) or "server",
        engine=_engine(dep["labels"]),
        model=notes.get(inference_manifests.ANNOTATION_MODEL),
        service=svc["name"] if svc is not None else None,
        service_type=svc["type"] if svc is not None else None,
        replicas_ready=dep["ready"],
        replicas_desired=dep["desired"],
        gpus_per_replica=int(notes.get(inference_manifests.ANNOTATION_GPUS, "0") or 0),
        url=url,
        load_balancer=svc.get("loadBalancer") if svc is not None else None,
        source_ranges=list(svc.get("sourceRanges") or []) if svc is not None else [],
    )


def _from_watches(infs: list[Informer]) -> list[ModelService]:
    """Every model server in the watched deployments and services, recomputed only when either changed."""
    deps, svcs = infs

    def compute() -> list[ModelService]:
        managed = [d for d in deps.snapshot()[1].values() if kind_of(d["labels"])]
        by_name = {(s["namespace"], s["name"]): s for s in svcs.snapshot()[1].values() if s["managed"]}
        out = [
            _watched_service(d, by_name.get((d["namespace"], inference_manifests.service_name(d["name"]))))
            for d in managed
        ]
        return sorted(out, key=lambda x: (x.namespace, x.name))

    found: list[ModelService] = memoised(deps, "model-services", (deps.version, svcs.version), compute)
    return found


async def _listed(ctx: CallContext, req: ListRequest) -> ModelServices:
    row = await _cluster(ctx, req.cluster_tag)
    got = await watched.from_watches(ctx.app, row, ("deployments", "services"), _from_watches,
                                     partial(_services, ctx.app, row, None))
    items = [s for s in got.value if req.namespace in (None, s.namespace)]
    return ModelServices(cluster_tag=row.tag, services=items, count=len(items), source=got.source,
                         watch=got.watch, note=got.note)


def cluster_row(app: AppContext, tag: str | None) -> ClusterRow:
    """The cluster a call acts on (the documented default when no tag is given). Blocking."""
    return get_cluster(app.db, resolve_tag(app.db, tag))


async def _cluster(ctx: CallContext, tag: str | None) -> ClusterRow:
    return await to_thread.run_sync(cluster_row, ctx.app, tag)


@operation("inference_list_services", method="GET", path="/inference/services", example={})
async def inference_list_services(ctx: CallContext, req: ListRequest) -> ModelServices:
    """The model servers deployed by inference_deploy_container and the SGLang routers in front of them
    (inference_router_deploy; kind says which): engine, served model, replicas ready of desired, GPUs per replica,
    Service and URL. Read-only; served from the cluster's watches of deployments and
    services (`watch` says how fresh; stale with its age while a watch is down)."""
    return await _listed(ctx, req)


@operation("inference_list_public_services", method="GET", path="/inference/public-services", example={})
async def inference_list_public_services(ctx: CallContext, req: ListRequest) -> ModelServices:
    """Only the model servers exposed outside the cluster (LoadBalancer Services), with their URLs, scheme
    (internal or internet-facing) and source ranges. Read-only; from the watches like inference_list_services."""
    listed = await _listed(ctx, req)
    items = [s for s in listed.services if s.service_type == "LoadBalancer"]
    return listed.model_copy(update={"services": items, "count": len(items)})
