"""Cluster status: nodes, GPUs, storage and dependencies of the active cluster, from cached reads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from anyio import to_thread
from kubernetes import client as k8s

from instantstart.catalog import operation
from instantstart.catalog.base import NoInput
from instantstart.context import AppContext, CallContext
from instantstart.errors import (
    InstantStartError,
)
from instantstart.kube.calls import kube_api
from instantstart.manifests.storage import DEFAULT_CLAIM, DEFAULT_NAMESPACE
from instantstart.services.cluster import hyperpod_stage as hyperpod
from instantstart.services.cluster.status_model import (
    AcceleratorTotals,
    ClaimStatus,
    ClusterStatus,
    GroupStatus,
    NodeStatus,
    dependency_health,
    latest_operation,
)
from instantstart.services.cluster.status_reads import GPU, read_allocations, read_claims, read_nodes
from instantstart.services.core.registry import get_cluster, hyperpod_cluster_name, resolve_tag
from instantstart.store.models import ClusterRow, utcnow

T = TypeVar("T")

VERIFY_WAIT_SECONDS = 20 * 60


def _api_or_error(app: AppContext, row: ClusterRow) -> k8s.ApiClient | InstantStartError:
    """The ApiClient, or why there is none (cached either way, so an EKS cluster that is not ACTIVE yet
    costs one DescribeCluster per cache interval however many callers poll)."""
    try:
        return kube_api(app.kube, row.eks_cluster_name, row.region)
    except InstantStartError as exc:
        return exc


def _expects_gpu(instance_type: str) -> bool:
    family = instance_type.removeprefix("ml.").split(".", 1)[0]
    return family[:1] in ("g", "p") and instance_type.startswith("ml.")


async def _cached(app: AppContext, key: str, fn: Callable[[], T]) -> T:
    async def fetch() -> T:
        return await to_thread.run_sync(fn)

    value: T = await app.cache.get(key, fetch)
    return value


async def _reads(
    app: AppContext, row: ClusterRow, hp_name: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[str, dict[str, int]], list[dict[str, Any]], str | None]:
    """HyperPod's DescribeCluster and the Kubernetes reads (nodes, accelerator requests, claims), cached;
    the last item says why Kubernetes was not reachable (None when it was)."""
    base = f"{row.region}:{row.eks_cluster_name}"
    hp_task = asyncio.ensure_future(hyperpod.cached_describe(app, row.region, hp_name))
    try:
        api_or_error = await _cached(app, f"kubeapi:{base}", lambda: _api_or_error(app, row))
        if isinstance(api_or_error, InstantStartError):
            raise api_or_error
        api = api_or_error
        hp, nodes, used, pvcs = await asyncio.gather(
            hp_task,
            _cached(app, f"kube:{base}:nodes", lambda: read_nodes(api)),
            _cached(app, f"kube:{base}:pods-accelerators", lambda: read_allocations(api)),
            _cached(app, f"kube:{base}:pvcs", lambda: read_claims(api)),
        )
    except InstantStartError as exc:
        return await hp_task, [], {}, [], exc.message
    return hp, nodes, used, pvcs, None


def _groups(
    hp: dict[str, Any] | None, hp_name: str, usable: list[dict[str, Any]], problems: list[str]
) -> list[GroupStatus]:
    """Each HyperPod instance group's counts against its Ready, schedulable Kubernetes nodes."""
    if hp is None:
        problems.append(f"HyperPod cluster {hp_name} does not exist (hyperpod_create creates it).")
        return []
    hp_status = str(hp.get("ClusterStatus", "UNKNOWN"))
    if hp_status != "InService":
        reason = f": {hp['FailureMessage']}" if hp.get("FailureMessage") else ""
        problems.append(f"HyperPod cluster {hp_name} is {hp_status}{reason}.")
    groups = []
    for g in hp.get("InstanceGroups") or []:
        name = g.get("InstanceGroupName", "")
        current, target = int(g.get("CurrentCount") or 0), int(g.get("TargetCount", g.get("CurrentCount")) or 0)
        k8s_ok = sum(1 for n in usable if n["instanceGroup"] == name and n["hyperpodCluster"] in (None, hp_name))
        groups.append(
            GroupStatus(
                name=name,
                instance_type=g.get("InstanceType"),
                status=g.get("Status"),
                current_count=current,
                target_count=target,
                nodes_ready_schedulable=k8s_ok,
            )
        )
        if current != target or k8s_ok != target:
            problems.append(
                f"instance group {name}: {k8s_ok} of {target} nodes Ready and schedulable in Kubernetes "
                f"(HyperPod CurrentCount {current}, TargetCount {target}, status {g.get('Status')})."
            )
    return groups


def _node_view(n: dict[str, Any], alloc: dict[str, int]) -> NodeStatus:
    return NodeStatus(
        name=n["name"],
        instance_type=n["instanceType"],
        instance_group=n["instanceGroup"],
        zone=n["zone"],
        ready=n["ready"],
        schedulable=n["schedulable"],
        health_status=n["healthStatus"],
        deep_health_check=n["deepHealthCheck"],
        fault_reasons=n.get("faultReasons"),
        taints=n["taints"],
        gpus=n["gpuAllocatable"],
        gpus_allocated=alloc["gpu"],
        neuron_devices=n["neuronAllocatable"],
    )


def _nodes(
    nodes: list[dict[str, Any]], used: dict[str, dict[str, int]], problems: list[str]
) -> tuple[list[NodeStatus], list[AcceleratorTotals]]:
    """Every node's view, and accelerator totals per instance type (a GPU type advertising none is a problem)."""
    views = []
    totals: dict[str, dict[str, int]] = {}
    for n in nodes:
        alloc = used.get(n["name"], {"gpu": 0, "neuron": 0})
        views.append(_node_view(n, alloc))
        t = totals.setdefault(
            n["instanceType"], dict.fromkeys(("nodes", "ready", "gpu", "gpuUsed", "gpuFree", "neuron", "neuronUsed"), 0)
        )
        t["nodes"] += 1
        t["gpu"] += n["gpuAllocatable"]
        t["gpuUsed"] += alloc["gpu"]
        t["neuron"] += n["neuronAllocatable"]
        t["neuronUsed"] += alloc["neuron"]
        if n["ready"] and n["schedulable"]:
            t["ready"] += 1
            t["gpuFree"] += max(n["gpuAllocatable"] - alloc["gpu"], 0)
        if n["ready"] and _expects_gpu(n["instanceType"]) and n["gpuAllocatable"] == 0 and n["healthStatus"]:
            problems.append(
                f"node {n['name']} ({n['instanceType']}) advertises no {GPU}: is the NVIDIA device "
                "plugin running (cluster_configure_dependencies)?"
            )
    accelerators = [
        AcceleratorTotals(
            instance_type=k,
            nodes=v["nodes"],
            nodes_ready=v["ready"],
            gpu_total=v["gpu"],
            gpu_allocated=v["gpuUsed"],
            gpu_available=v["gpuFree"],
            neuron_total=v["neuron"],
            neuron_allocated=v["neuronUsed"],
        )
        for k, v in sorted(totals.items())
    ]
    return views, accelerators


def _storage(
    pvcs: list[dict[str, Any]], claims: tuple[str, ...], reachable: bool, problems: list[str]
) -> list[ClaimStatus]:
    """The claims as seen; each required claim (namespace default) must exist and be Bound."""
    storage = [
        ClaimStatus(
            namespace=c["namespace"],
            name=c["name"],
            phase=c["phase"],
            bound=c["bound"],
            volume_name=c["volumeName"],
            managed=c["managed"],
        )
        for c in pvcs
    ]
    if reachable:
        for claim in claims:
            found = next((c for c in storage if c.name == claim and c.namespace == DEFAULT_NAMESPACE), None)
            if found is None:
                problems.append(f"storage claim {DEFAULT_NAMESPACE}/{claim} does not exist (s3_storage_create).")
            elif not found.bound:
                problems.append(f"storage claim {DEFAULT_NAMESPACE}/{claim} is {found.phase}, not Bound.")
    return storage


async def collect_status(app: AppContext, tag: str, claims: tuple[str, ...] = (DEFAULT_CLAIM,)) -> ClusterStatus:
    """Build the status of cluster `tag` from cached reads (one call per resource per cache interval).
    `claims` are the claim names (namespace default) that must be Bound for the cluster to be ready."""
    row = await to_thread.run_sync(get_cluster, app.db, tag)
    region, hp_name = row.region, hyperpod_cluster_name(row)
    problems: list[str] = []
    hp, nodes, used, pvcs, unreachable = await _reads(app, row, hp_name)
    if unreachable is not None:
        problems.append(f"Kubernetes API of {row.eks_cluster_name} not reachable: {unreachable}")
    usable = [n for n in nodes if n["ready"] and n["schedulable"]]
    groups = _groups(hp, hp_name, usable, problems)
    node_views, accelerators = _nodes(nodes, used, problems)
    storage = _storage(pvcs, claims, unreachable is None, problems)
    recorded, deps = dependency_health(row.details or {})
    problems.extend(
        f"dependency {d.name} is {d.status}{': ' + d.message if d.message else ''}." for d in deps if not d.healthy
    )
    return ClusterStatus(
        cluster_tag=tag,
        region=region,
        ready=not problems,
        problems=problems,
        stages=dict(row.stages or {}),
        latest_operation=await to_thread.run_sync(latest_operation, app, tag),
        kubernetes_reachable=unreachable is None,
        hyperpod_cluster_name=hp_name,
        hyperpod_status="NOT_FOUND" if hp is None else str(hp.get("ClusterStatus", "UNKNOWN")),
        instance_groups=groups,
        nodes=node_views,
        node_count=len(nodes),
        nodes_ready_schedulable=len(usable),
        accelerators=accelerators,
        storage=storage,
        dependencies_recorded=recorded,
        dependencies=deps,
        checked_at=utcnow(),
    )


@operation("cluster_get_status", method="GET", path="/clusters/status", example={})
async def cluster_get_status(ctx: CallContext, req: NoInput) -> ClusterStatus:
    """The active cluster's health (needs an active cluster: cluster_switch): Kubernetes nodes (Ready,
    schedulable, HyperPod health and deep-health-check labels, taints, instance type and group), GPUs per
    instance type (allocatable total, requested by non-terminated pods, available on usable nodes), storage
    claims (bound or not), the HyperPod instance groups' counts against Ready nodes, and dependency health.
    `ready` is true when everything matches; otherwise `problems` says what does not. Reads are cached for
    a few seconds, so polling it is cheap."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, None)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    recorded = (row.details or {}).get("storage") or {}
    claims = tuple(sorted(recorded)) if isinstance(recorded, dict) and recorded else (DEFAULT_CLAIM,)
    return await collect_status(ctx.app, tag, claims)
