"""Deployed model servers and the SGLang routers in front of them: list them (each with its kind)."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.kube import core_kinds
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.informers import Informer
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


def _model_service(dep: Any, svc: Any) -> ModelService:
    meta = dep.metadata
    notes = meta.annotations or {}
    url = None
    if svc is not None:
        port = svc.spec.ports[0].port if svc.spec.ports else notes.get(inference_manifests.ANNOTATION_PORT)
        ingress = (svc.status.load_balancer.ingress if svc.status and svc.status.load_balancer else None) or []
        external = (ingress[0].hostname or ingress[0].ip) if ingress else None
        url = _url(svc.metadata.name, meta.namespace, port, svc.spec.type, external)
    return ModelService(
        name=str(meta.name),
        namespace=str(meta.namespace),
        kind=kind_of(meta.labels or {}) or "server",
        engine=_engine(meta.labels or {}),
        model=notes.get(inference_manifests.ANNOTATION_MODEL),
        service=svc.metadata.name if svc is not None else None,
        service_type=svc.spec.type if svc is not None else None,
        replicas_ready=int((dep.status.ready_replicas if dep.status else 0) or 0),
        replicas_desired=int((dep.spec.replicas if dep.spec else 0) or 0),
        gpus_per_replica=int(notes.get(inference_manifests.ANNOTATION_GPUS, "0") or 0),
        url=url,
        load_balancer=inference_manifests.load_balancer_scheme(svc.spec.type, svc.metadata.annotations)
        if svc is not None
        else None,
        source_ranges=list((svc.spec.load_balancer_source_ranges if svc is not None else None) or []),
    )


def _services(app: AppContext, row: ClusterRow, namespace: str | None) -> list[ModelService]:
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    # Model servers (an engine label) and routers (component=router): one selector cannot say "or", kind_of can.
    selector = f"{inference_manifests.LABEL_MANAGED}={inference_manifests.MANAGED_BY}"
    deps: Any
    svcs: Any
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
    by_name = {(s.metadata.namespace, s.metadata.name): s for s in svcs.items or []}
    out = [
        _model_service(dep, by_name.get((dep.metadata.namespace, inference_manifests.service_name(dep.metadata.name))))
        for dep in deps.items or []
        if kind_of(dep.metadata.labels or {})
    ]
    return sorted(out, key=lambda s: (s.namespace, s.name))


def _url(name: str, namespace: str, port: Any, service_type: str | None, external: str | None) -> str:
    if service_type == "LoadBalancer" and external:
        return f"http://{external}:{port}"
    return f"http://{name}.{namespace}.svc.cluster.local:{port}"


def _watched_service(dep: dict[str, Any], svc: dict[str, Any] | None) -> ModelService:
    """ModelService from the watched projections (base.watch.projections), as _model_service from typed objects."""
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
