"""node_describe: one node as a diagnosis needs it — Kubernetes and HyperPod views side by side."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws.hyperpod import describe_node
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import NotFound
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import api_status
from instantstart.manifests.labels import HEALTH_LABEL
from instantstart.operations.waiting import blocking
from instantstart.services.base.hyperpod_reads import NODE_ID, instance_id
from instantstart.services.base.registry import get_cluster, hyperpod_cluster_name, resolve_tag
from instantstart.services.base.status_reads import GPU, pod_request
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

MAX_PODS = 100


class NodeDescribeRequest(WireModel):
    """One node by Kubernetes Node name or HyperPod instance id."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Default: see cluster_list_all (active).")
    node_id: str = Field(
        pattern=NODE_ID,
        description="i-0123456789abcdef0 or the Kubernetes Node name hyperpod-i-0123456789abcdef0.",
    )


class NodeDescription(WireModel):
    """Labels, taints, conditions, HyperPod instance status and health, GPUs, and the pods on the node."""

    cluster_tag: str
    node_name: str
    instance_id: str
    kubernetes_found: bool
    health_status: str | None
    labels: dict[str, str]
    taints: list[str]
    conditions: list[dict[str, Any]]
    unschedulable: bool
    gpus: dict[str, int] = Field(description="allocatable and requested nvidia.com/gpu.")
    hyperpod: dict[str, Any] | None = Field(description="DescribeClusterNode: status, group, type, launch time.")
    pods: list[dict[str, Any]]
    pods_truncated: bool


def _condition(c: dict[str, Any]) -> dict[str, Any]:
    return {k: c.get(k) for k in ("type", "status", "reason", "message", "lastTransitionTime") if c.get(k) is not None}


def kube_view(app: AppContext, row: ClusterRow, name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The Node and the non-terminated pods bound to it (blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    try:
        node = core_kinds.read_node(api, name)
    except Exception as exc:
        if api_status(exc) != 404:
            raise
        node = None
    selector = f"spec.nodeName={name},status.phase!=Succeeded,status.phase!=Failed"
    listed = kube_call("list pods on the node", core_kinds.list_pods, api, None, field_selector=selector)
    return node, wire.items(listed)


def hyperpod_view(app: AppContext, row: ClusterRow, node: str) -> dict[str, Any] | None:
    """DescribeClusterNode, compacted (None when the cluster does not know the instance; blocking)."""
    if not (row.hyperpod_cluster_name or (row.stages or {}).get("hyperpod")):
        return None
    described = describe_node(app.aws, row.region, hyperpod_cluster_name(row), node)
    if described is None:
        return None
    status = described.get("InstanceStatus") or {}
    return {
        "status": status.get("Status"),
        "message": status.get("Message"),
        "instanceGroup": described.get("InstanceGroupName"),
        "instanceType": described.get("InstanceType"),
        "launchTime": str(described.get("LaunchTime")) if described.get("LaunchTime") else None,
        "capacityType": described.get("CapacityType"),
        "availabilityZone": (described.get("Placement") or {}).get("AvailabilityZone"),
    }


@operation("node_describe", method="GET", path="/diagnostics/node", example={"nodeId": "i-0123456789abcdef0"})
async def node_describe(ctx: CallContext, req: NodeDescribeRequest) -> NodeDescription:
    """Read-only: one node of a cluster (i-… or hyperpod-i-…): Kubernetes labels, taints, conditions, whether
    it is cordoned, the HyperPod health label, GPUs allocatable and requested, the non-terminated pods on it
    (at most 100), and the HyperPod instance status from DescribeClusterNode. NOT_FOUND when neither
    Kubernetes nor HyperPod knows the node."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    iid = instance_id(req.node_id)
    name = f"hyperpod-{iid}"
    node, pods = await blocking(kube_view, ctx.app, row, name)
    hyperpod = await blocking(hyperpod_view, ctx.app, row, iid)
    if node is None and hyperpod is None:
        raise NotFound(
            f"Invalid input: nodeId: neither Kubernetes nor HyperPod knows {req.node_id} in cluster {tag}",
            hint="cluster_get_status lists the nodes (Kubernetes names hyperpod-i-…).",
            details={"fields": [{"field": "nodeId", "message": "no such node"}]},
        )
    found = node or {}
    md, spec, status = found.get("metadata") or {}, found.get("spec") or {}, found.get("status") or {}
    labels = {str(k): str(v) for k, v in (md.get("labels") or {}).items()}
    taints = [
        f"{t.get('key')}{'=' + str(t['value']) if t.get('value') else ''}:{t.get('effect')}"
        for t in spec.get("taints") or []
    ]
    try:
        allocatable = int(str((status.get("allocatable") or {}).get(GPU, 0)))
    except ValueError:
        allocatable = 0
    requested = sum(pod_request(p.get("spec") or {}, GPU) for p in pods)
    pod_items = [
        {
            "namespace": (p.get("metadata") or {}).get("namespace"),
            "name": (p.get("metadata") or {}).get("name"),
            "phase": (p.get("status") or {}).get("phase"),
            "gpus": pod_request(p.get("spec") or {}, GPU),
        }
        for p in pods
    ]
    return NodeDescription(
        cluster_tag=tag,
        node_name=name,
        instance_id=iid,
        kubernetes_found=node is not None,
        health_status=labels.get(HEALTH_LABEL),
        labels=labels,
        taints=taints,
        conditions=[_condition(c) for c in status.get("conditions") or []],
        unschedulable=bool(spec.get("unschedulable")),
        gpus={"allocatable": allocatable, "requested": requested},
        hyperpod=hyperpod,
        pods=pod_items[:MAX_PODS],
        pods_truncated=len(pod_items) > MAX_PODS,
    )
