"""cluster_list_workloads: the pods, services and deployments of the active cluster (read-only, cached)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.wire import Obj
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.store.models import ClusterRow, utcnow
from instantstart.validation import KubeName

LIMIT = 500


class WorkloadsRequest(WireModel):
    """Which namespace to list (all namespaces when absent)."""

    namespace: KubeName | None = Field(default=None, description="Only this namespace; all when absent.")


class PodInfo(WireModel):
    """One pod: where it runs and how it is doing."""

    namespace: str
    name: str
    phase: str
    ready: str = Field(description="Ready containers / all containers, e.g. 1/1.")
    restarts: int
    node: str | None
    gpus_requested: int
    created_at: datetime | None


class ServiceInfo(WireModel):
    """One Service and its ports."""

    namespace: str
    name: str
    type: str
    cluster_ip: str | None
    ports: list[str] = Field(description="port/protocol, with the node port when there is one.")


class DeploymentInfo(WireModel):
    """One Deployment and its replica counts."""

    namespace: str
    name: str
    replicas: int
    ready_replicas: int
    available_replicas: int
    updated_replicas: int


class WorkloadsResult(WireModel):
    """Pods, Services and Deployments of the active cluster (at most 500 of each, newest reads)."""

    cluster_tag: str
    namespace: str | None
    pods: list[PodInfo]
    services: list[ServiceInfo]
    deployments: list[DeploymentInfo]
    truncated: bool = Field(description="True when a list had more than 500 items and was cut.")
    checked_at: datetime


def _gpus(pod: Obj) -> int:
    total = 0
    for container in wire.spec(pod).get("containers") or []:
        resources = wire.section(container, "resources")
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        value = limits.get("nvidia.com/gpu") or requests.get("nvidia.com/gpu") or "0"
        try:
            total += int(str(value))
        except ValueError:
            continue
    return total


def _pod(pod: Obj) -> PodInfo:
    statuses = wire.container_statuses(pod)
    containers = wire.spec(pod).get("containers") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    return PodInfo(
        namespace=wire.namespace(pod),
        name=wire.name(pod),
        phase=wire.phase(pod) or "Unknown",
        ready=f"{ready}/{len(containers)}",
        restarts=wire.restarts(pod),
        node=wire.node_name(pod),
        gpus_requested=_gpus(pod),
        created_at=wire.created_at(pod),
    )


def _service(svc: Obj) -> ServiceInfo:
    ports = []
    for port in wire.ports(svc):
        text = f"{port.get('port')}/{port.get('protocol') or 'TCP'}"
        ports.append(f"{text}:{port['nodePort']}" if port.get("nodePort") else text)
    return ServiceInfo(
        namespace=wire.namespace(svc),
        name=wire.name(svc),
        type=wire.service_type(svc) or "ClusterIP",
        cluster_ip=wire.spec(svc).get("clusterIP"),
        ports=ports,
    )


def _deployment(dep: Obj) -> DeploymentInfo:
    status = wire.status(dep)
    return DeploymentInfo(
        namespace=wire.namespace(dep),
        name=wire.name(dep),
        replicas=wire.replicas(dep),
        ready_replicas=wire.ready_replicas(dep),
        available_replicas=int(status.get("availableReplicas") or 0),
        updated_replicas=int(status.get("updatedReplicas") or 0),
    )


def read_workloads(app: AppContext, row: ClusterRow, namespace: str | None) -> WorkloadsResult:
    """Blocking: list the three kinds once, in one namespace or all of them."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    where = f"in {row.eks_cluster_name}"
    if namespace:
        pods = kube_call(f"list pods {where}", core_kinds.list_pods, api, namespace, limit=LIMIT)
        services = kube_call(f"list services {where}", core_kinds.list_services, api, namespace, limit=LIMIT)
        deps = kube_call(f"list deployments {where}", core_kinds.list_deployments, api, namespace, limit=LIMIT)
    else:
        pods = kube_call(f"list pods {where}", core_kinds.list_pods, api, None, limit=LIMIT)
        services = kube_call(f"list services {where}", core_kinds.list_services, api, None, limit=LIMIT)
        deps = kube_call(f"list deployments {where}", core_kinds.list_deployments, api, None, limit=LIMIT)
    truncated = any(bool(wire.metadata(x).get("continue")) for x in (pods, services, deps))

    def key(item: Any) -> tuple[str, str]:
        return (item.namespace, item.name)

    return WorkloadsResult(
        cluster_tag=row.tag,
        namespace=namespace,
        pods=sorted((_pod(p) for p in wire.items(pods)), key=key),
        services=sorted((_service(s) for s in wire.items(services)), key=key),
        deployments=sorted((_deployment(d) for d in wire.items(deps)), key=key),
        truncated=truncated,
        checked_at=utcnow(),
    )


@operation("cluster_list_workloads", method="GET", path="/clusters/workloads", example={"namespace": "default"})
async def cluster_list_workloads(ctx: CallContext, req: WorkloadsRequest) -> WorkloadsResult:
    """The active cluster's pods (phase, ready containers, restarts, node, GPUs requested), Services (type,
    cluster IP, ports) and Deployments (desired, ready, available, updated replicas); needs an active
    cluster (cluster_switch) whose Kubernetes API answers. Read-only; at most 500 of each kind; reads are
    cached for a few seconds, so polling it is cheap."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, None)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)

    async def fetch() -> WorkloadsResult:
        return await to_thread.run_sync(read_workloads, ctx.app, row, req.namespace)

    key = f"kube:{row.region}:{row.eks_cluster_name}:workloads:{req.namespace or '*'}"
    result: WorkloadsResult = await ctx.app.cache.get(key, fetch)
    return result
