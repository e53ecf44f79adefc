"""Deployed model servers: list them and undeploy them (with their router and autoscaler)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.kube import k8s
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import inference as m
from instantstart.services.core.registry import get_cluster, resolve_tag
from instantstart.services.core.stages import blocking
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag, KubeName


class ListRequest(WireModel):
    """Which cluster and namespace (every namespace when absent)."""

    namespace: KubeName | None = None
    cluster_tag: ClusterTag | None = None


class ModelService(WireModel):
    """One deployed model server."""

    name: str
    namespace: str
    engine: str
    model: str | None
    service: str | None
    service_type: str | None
    replicas_ready: int
    replicas_desired: int
    gpus_per_replica: int
    url: str | None = Field(description="In-cluster URL, or the load balancer's when external.")


class ModelServices(WireModel):
    """The model servers this control plane deployed."""

    cluster_tag: str
    services: list[ModelService]
    count: int


def _model_service(dep: Any, svc: Any) -> ModelService:
    meta = dep.metadata
    notes = meta.annotations or {}
    url = None
    if svc is not None:
        port = svc.spec.ports[0].port if svc.spec.ports else notes.get(m.ANNOTATION_PORT)
        url = f"http://{svc.metadata.name}.{meta.namespace}.svc.cluster.local:{port}"
        ingress = (svc.status.load_balancer.ingress if svc.status and svc.status.load_balancer else None) or []
        if svc.spec.type == "LoadBalancer" and ingress:
            url = f"http://{ingress[0].hostname or ingress[0].ip}:{port}"
    return ModelService(
        name=str(meta.name), namespace=str(meta.namespace),
        engine=(meta.labels or {}).get(m.LABEL_ENGINE, "other"), model=notes.get(m.ANNOTATION_MODEL),
        service=svc.metadata.name if svc is not None else None,
        service_type=svc.spec.type if svc is not None else None,
        replicas_ready=int((dep.status.ready_replicas if dep.status else 0) or 0),
        replicas_desired=int((dep.spec.replicas if dep.spec else 0) or 0),
        gpus_per_replica=int(notes.get(m.ANNOTATION_GPUS, "0") or 0), url=url,
    )


def _services(app: AppContext, row: ClusterRow, namespace: str | None) -> list[ModelService]:
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    selector = f"{m.LABEL_MANAGED}={m.MANAGED_BY},{m.LABEL_ENGINE}"
    deps: Any
    svcs: Any
    if namespace:
        deps = kube_call("list deployments", apps.list_namespaced_deployment, namespace, label_selector=selector)
        svcs = kube_call("list services", core.list_namespaced_service, namespace, label_selector=m.LABEL_MANAGED)
    else:
        deps = kube_call("list deployments", apps.list_deployment_for_all_namespaces, label_selector=selector)
        svcs = kube_call("list services", core.list_service_for_all_namespaces, label_selector=m.LABEL_MANAGED)
    by_name = {(s.metadata.namespace, s.metadata.name): s for s in svcs.items or []}
    out = [
        _model_service(dep, by_name.get((dep.metadata.namespace, m.service_name(dep.metadata.name))))
        for dep in deps.items or []
    ]
    return sorted(out, key=lambda s: (s.namespace, s.name))


def cluster_row(app: AppContext, tag: str | None) -> ClusterRow:
    """The cluster a call acts on (the documented default when no tag is given). Blocking."""
    return get_cluster(app.db, resolve_tag(app.db, tag))


async def _cluster(ctx: CallContext, tag: str | None) -> ClusterRow:
    return await to_thread.run_sync(cluster_row, ctx.app, tag)


@operation("inference_list_services", method="GET", path="/inference/services", example={})
async def inference_list_services(ctx: CallContext, req: ListRequest) -> ModelServices:
    """The model servers deployed by inference_deploy_container: engine, served model, replicas ready of
    desired, GPUs per replica, Service and URL. Read-only."""
    row = await _cluster(ctx, req.cluster_tag)
    items = await blocking(_services, ctx.app, row, req.namespace)
    return ModelServices(cluster_tag=row.tag, services=items, count=len(items))


@operation("inference_list_public_services", method="GET", path="/inference/public-services", example={})
async def inference_list_public_services(ctx: CallContext, req: ListRequest) -> ModelServices:
    """Only the model servers exposed outside the cluster (LoadBalancer Services), with their URLs.
    Read-only."""
    row = await _cluster(ctx, req.cluster_tag)
    items = [s for s in await blocking(_services, ctx.app, row, req.namespace) if s.service_type == "LoadBalancer"]
    return ModelServices(cluster_tag=row.tag, services=items, count=len(items))
