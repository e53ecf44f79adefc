"""The cluster status as the faces see it: wire models, dependency health, the latest operation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.context import AppContext
from instantstart.services.base.facts import ClusterFacts
from instantstart.services.base.target import cluster_target

# Dependency states that do not block verification. DEGRADED counts as usable, as the dependencies stage
# itself treats it; the status still shows it.
HEALTHY_WORDS = {"READY", "HEALTHY", "INSTALLED", "SUCCEEDED", "ACTIVE", "DEGRADED", "OK", "DEPLOYED", "RUNNING"}


class NodeStatus(WireModel):
    """One Kubernetes node as HyperPod and the scheduler see it."""

    name: str
    instance_type: str
    instance_group: str | None
    zone: str | None
    ready: bool
    schedulable: bool = Field(description="Not cordoned, not tainted unhealthy/not-ready, health label Schedulable.")
    health_status: str | None = Field(description="sagemaker.amazonaws.com/node-health-status (absent: not HyperPod).")
    deep_health_check: str | None = Field(description="InProgress, Passed, Failed; absent when not configured.")
    fault_reasons: str | None = Field(default=None, description="sagemaker.amazonaws.com/fault-reasons, if any.")
    taints: list[str]
    gpus: int
    gpus_allocated: int
    neuron_devices: int


class AcceleratorTotals(WireModel):
    """Accelerators of one instance type: total allocatable, requested by running pods, free on usable nodes."""

    instance_type: str
    nodes: int
    nodes_ready: int
    gpu_total: int
    gpu_allocated: int
    gpu_available: int = Field(description="Unrequested GPUs on Ready, schedulable nodes.")
    neuron_total: int
    neuron_allocated: int


class GroupStatus(WireModel):
    """A HyperPod instance group against what Kubernetes shows."""

    name: str
    instance_type: str | None
    status: str | None
    current_count: int
    target_count: int
    nodes_ready_schedulable: int


class ClaimStatus(WireModel):
    """A PersistentVolumeClaim and whether it is bound."""

    namespace: str
    name: str
    phase: str
    bound: bool
    volume_name: str | None
    managed: bool = Field(description="Created by InstantStart (s3_storage_create).")


class DependencyHealth(WireModel):
    """One dependency as the dependencies stage last recorded it."""

    name: str
    healthy: bool
    status: str
    message: str | None = None


class LatestOperation(WireModel):
    """The newest operation on the cluster (creation, storage, deletion …): where it stands and why."""

    operation_id: str
    kind: str
    status: str = Field(description="PENDING, RUNNING, SUCCEEDED, FAILED or CANCELLED.")
    terminal: bool
    current_stage: str | None
    message: str = Field(description="The running stage's latest progress message, or the outcome.")
    error: dict[str, Any] | None


class WatchFreshness(WireModel):
    """How current the Kubernetes side of an answer is (it comes from the cluster's watches)."""

    synced: bool
    stale: bool = Field(description="True while a watch is disconnected: the last known state is served.")
    data_age_seconds: float | None = Field(description="How old the served state is (0 while every watch is up).")
    watches: list[dict[str, Any]] = Field(description="Per resource kind: state, connected, reconnects, relists.")


class ClusterStatus(WireModel):
    """The cluster at a glance; `ready` is the verification verdict and `problems` say what blocks it.
    A summary of bounded size at any cluster size: node detail is node_list's."""

    cluster_tag: str
    region: str
    ready: bool
    problems: list[str]
    stages: dict[str, Any] = Field(description="Creation stage → status, as recorded on the cluster.")
    latest_operation: LatestOperation | None = Field(description="None only when no operation ever ran on it.")
    kubernetes_reachable: bool
    hyperpod_cluster_name: str | None
    hyperpod_status: str = Field(description="DescribeCluster ClusterStatus, or NOT_FOUND.")
    instance_groups: list[GroupStatus]
    nodes: list[NodeStatus] = Field(
        description="At most nodeLimit nodes, those needing attention first (node_list pages through all)."
    )
    nodes_omitted: int = Field(default=0, description="Nodes not listed here (see node_list).")
    nodes_unhealthy: int = Field(default=0, description="Nodes not Ready, not schedulable or reported unhealthy.")
    problems_omitted: int = Field(default=0, description="Problems beyond the first ones listed.")
    watch: WatchFreshness | None = Field(default=None, description="Freshness of the Kubernetes data.")
    node_count: int
    nodes_ready_schedulable: int
    accelerators: list[AcceleratorTotals]
    storage: list[ClaimStatus]
    dependencies_recorded: bool
    dependencies: list[DependencyHealth]
    checked_at: datetime


def dependency_health(facts: ClusterFacts) -> tuple[bool, list[DependencyHealth]]:
    """Read what the dependencies stage recorded in the cluster facts (absent: nothing recorded)."""
    raw: Any = facts.dependencies
    if raw is None:
        return False, []
    if isinstance(raw, dict) and isinstance(raw.get("items") or raw.get("dependencies"), (list, dict)):
        raw = raw.get("items") or raw.get("dependencies")
    entries: list[tuple[str, Any]] = []
    if isinstance(raw, dict):
        entries = list(raw.items())
    elif isinstance(raw, list):
        entries = [(str(e.get("name", f"#{i}")) if isinstance(e, dict) else f"#{i}", e) for i, e in enumerate(raw)]
    out = []
    for name, entry in entries:
        if isinstance(entry, dict):
            flag = entry.get("healthy", entry.get("ready"))
            word = str(entry.get("status") or entry.get("state") or entry.get("phase") or "")
            healthy = bool(flag) if isinstance(flag, bool) else word.upper() in HEALTHY_WORDS
            status = word or ("healthy" if healthy else "unhealthy")
            message = str(entry.get("message") or "") or None
        else:
            status = str(entry)
            healthy = status.upper() in HEALTHY_WORDS
            message = None
        out.append(DependencyHealth(name=name, healthy=healthy, status=status, message=message))
    return True, out


def latest_operation(app: AppContext, tag: str) -> LatestOperation | None:
    """The newest operation targeting the cluster (a database read; no provider call)."""
    found, _ = app.runner.store.list_operations(target=cluster_target(tag), limit=1)
    if not found:
        return None
    op = found[0]
    stage = next((s for s in op.stages if s.name == op.current_stage), None)
    if stage is None and op.stages:
        stage = next((s for s in reversed(op.stages) if s.message), op.stages[-1])
    status = op.status.value
    return LatestOperation(
        operation_id=op.operation_id,
        kind=op.kind,
        status=status,
        terminal=status in ("SUCCEEDED", "FAILED", "CANCELLED"),
        current_stage=op.current_stage,
        message=(stage.message if stage and stage.message else status),
        error=op.error.model_dump(by_alias=True) if op.error else None,
    )
