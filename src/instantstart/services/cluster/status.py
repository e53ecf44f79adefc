"""Cluster status and the verification stage: nodes, GPUs, storage and dependencies of the active cluster."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from anyio import to_thread
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from pydantic import Field

from instantstart.aws.errors import translate
from instantstart.catalog import operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import (
    Conflict,
    InstantStartError,
    InvalidInput,
    NotFound,
    PreconditionFailed,
    ProviderError,
    Throttled,
)
from instantstart.manifests.storage import DEFAULT_CLAIM, DEFAULT_NAMESPACE
from instantstart.operations.kinds import PermanentError, StageSpec, TemporaryError
from instantstart.operations.runner import StageContext
from instantstart.services.cluster import hyperpod_stage as hyperpod
from instantstart.services.core.registry import get_cluster, resolve_tag
from instantstart.services.core.stages import mark
from instantstart.store.models import ClusterRow, utcnow

T = TypeVar("T")

HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
DHC_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
FAULT_LABEL = "sagemaker.amazonaws.com/fault-reasons"
GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
HP_CLUSTER_LABEL = "sagemaker.amazonaws.com/cluster-name"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neurondevice"
# Dependency states that do not block verification. DEGRADED counts as usable, as the dependencies stage
# itself treats it; the status still shows it.
HEALTHY_WORDS = {"READY", "HEALTHY", "INSTALLED", "SUCCEEDED", "ACTIVE", "DEGRADED", "OK", "DEPLOYED", "RUNNING"}
VERIFY_WAIT_SECONDS = 20 * 60


# -- Kubernetes calls -------------------------------------------------------------------------------


def kube_error(exc: Exception, action: str) -> InstantStartError:
    """The domain error for a failed Kubernetes call (API status → code; transport failures retryable)."""
    if isinstance(exc, InstantStartError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        text = f"{action}: HTTP {status}: {exc.reason}"
        if status == 404:
            return NotFound(text)
        if status == 409:
            return Conflict(text)
        if status == 422:
            return InvalidInput(text, hint="Kubernetes rejected the object as built; check the values named.")
        if status == 429:
            return Throttled(text)
        if status in (401, 403):
            return PreconditionFailed(
                text, hint="The control plane's identity needs an EKS access entry with cluster-admin (the EKS stage)."
            )
        return ProviderError(text)
    return ProviderError(f"{action}: {type(exc).__name__}: {exc}")


def kube_call(action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call the Kubernetes client, translating its errors (blocking; run through `blocking`)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        raise kube_error(exc, action) from exc


def kube_api(app: AppContext, row: ClusterRow) -> k8s.ApiClient:
    """The cluster's Kubernetes ApiClient (blocking), with AWS/token errors translated."""
    try:
        return app.kube.api_client(row.eks_cluster_name, row.region)
    except Exception as exc:
        raise translate(exc, f"reach the Kubernetes API of {row.eks_cluster_name}") from exc


def _api_or_error(app: AppContext, row: ClusterRow) -> k8s.ApiClient | InstantStartError:
    """The ApiClient, or why there is none (cached either way, so an EKS cluster that is not ACTIVE yet
    costs one DescribeCluster per cache interval however many callers poll)."""
    try:
        return kube_api(app, row)
    except InstantStartError as exc:
        return exc


def as_dict(api: k8s.ApiClient, obj: Any) -> dict[str, Any]:
    """A Kubernetes client model as its wire (camelCase) dict."""
    value: dict[str, Any] = api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return value


# -- what the status is built from (each read is one call per cache interval) ---------------------------


def _node_summary(node: dict[str, Any]) -> dict[str, Any]:
    md, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    labels = md.get("labels") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    taints = [
        f"{t.get('key')}{'=' + str(t['value']) if t.get('value') else ''}:{t.get('effect')}"
        for t in spec.get("taints") or []
    ]
    blocking_taints = [
        t
        for t in spec.get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
        and (t.get("key") == HEALTH_LABEL or str(t.get("key", "")).startswith("node.kubernetes.io/"))
    ]
    health = labels.get(HEALTH_LABEL)
    schedulable = not spec.get("unschedulable") and not blocking_taints and health in (None, "Schedulable")
    alloc = status.get("allocatable") or {}
    return {
        "name": md.get("name", ""),
        "instanceType": labels.get(INSTANCE_TYPE_LABEL) or labels.get("beta.kubernetes.io/instance-type") or "unknown",
        "instanceGroup": labels.get(GROUP_LABEL),
        "hyperpodCluster": labels.get(HP_CLUSTER_LABEL),
        "zone": labels.get("topology.kubernetes.io/zone"),
        "ready": ready,
        "schedulable": schedulable,
        "healthStatus": health,
        "deepHealthCheck": labels.get(DHC_LABEL),
        "faultReasons": labels.get(FAULT_LABEL),
        "taints": taints,
        "gpuAllocatable": _count(alloc.get(GPU)),
        "neuronAllocatable": _count(alloc.get(NEURON)),
    }


def _count(value: Any) -> int:
    """An extended-resource quantity (whole devices) as an int; absent or malformed is 0."""
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def _pod_request(spec: dict[str, Any], resource: str) -> int:
    """A pod's effective request of an extended resource: max(sum of containers, largest init container).
    An extended resource's request defaults to its limit."""

    def of(container: dict[str, Any]) -> int:
        res = container.get("resources") or {}
        return _count((res.get("requests") or {}).get(resource) or (res.get("limits") or {}).get(resource))

    main = sum(of(c) for c in spec.get("containers") or [])
    init = max((of(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def read_nodes(api: k8s.ApiClient) -> list[dict[str, Any]]:
    """Every Node, summarised (blocking)."""
    result = kube_call("list nodes", k8s.CoreV1Api(api).list_node)
    return [_node_summary(as_dict(api, n)) for n in result.items]


def read_allocations(api: k8s.ApiClient) -> dict[str, dict[str, int]]:
    """Accelerators requested by non-terminated pods bound to each node: {node: {gpu, neuron}} (blocking)."""
    result = kube_call(
        "list pods",
        k8s.CoreV1Api(api).list_pod_for_all_namespaces,
        field_selector="status.phase!=Succeeded,status.phase!=Failed",
    )
    used: dict[str, dict[str, int]] = {}
    for pod in result.items:
        body = as_dict(api, pod)
        spec = body.get("spec") or {}
        node = spec.get("nodeName")
        if not node or (body.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        slot = used.setdefault(node, {"gpu": 0, "neuron": 0})
        slot["gpu"] += _pod_request(spec, GPU)
        slot["neuron"] += _pod_request(spec, NEURON)
    return used


def read_claims(api: k8s.ApiClient) -> list[dict[str, Any]]:
    """Every PersistentVolumeClaim with its phase and volume (blocking)."""
    core = k8s.CoreV1Api(api)
    result = kube_call("list persistent volume claims", core.list_persistent_volume_claim_for_all_namespaces)
    claims = []
    for item in result.items:
        body = as_dict(api, item)
        md, spec = body.get("metadata") or {}, body.get("spec") or {}
        phase = (body.get("status") or {}).get("phase", "Pending")
        claims.append(
            {
                "namespace": md.get("namespace", DEFAULT_NAMESPACE),
                "name": md.get("name", ""),
                "phase": phase,
                "bound": phase == "Bound",
                "volumeName": spec.get("volumeName") or None,
                "storageClassName": spec.get("storageClassName"),
                "managed": (md.get("labels") or {}).get("app.kubernetes.io/managed-by") == "instantstart",
            }
        )
    return claims


def describe_hyperpod(app: AppContext, row: ClusterRow) -> dict[str, Any] | None:
    """DescribeCluster of the cluster's HyperPod cluster; None when it does not exist (blocking)."""
    sm = app.aws.client("sagemaker", row.region)
    return hyperpod.describe_hyperpod(sm, row.hyperpod_cluster_name or f"hp-cluster-{row.tag}")


# -- the status ---------------------------------------------------------------------------------------------


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


class ClusterStatus(WireModel):
    """The cluster at a glance; `ready` is the verification verdict and `problems` say what blocks it."""

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
    nodes: list[NodeStatus]
    node_count: int
    nodes_ready_schedulable: int
    accelerators: list[AcceleratorTotals]
    storage: list[ClaimStatus]
    dependencies_recorded: bool
    dependencies: list[DependencyHealth]
    checked_at: datetime


def dependency_health(details: dict[str, Any]) -> tuple[bool, list[DependencyHealth]]:
    """Read what the dependencies stage recorded in the cluster details (absent: nothing recorded)."""
    raw = details.get("dependencies")
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
    found, _ = app.runner.store.list_operations(target=f"cluster:{tag}", limit=1)
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


def _expects_gpu(instance_type: str) -> bool:
    family = instance_type.removeprefix("ml.").split(".", 1)[0]
    return family[:1] in ("g", "p") and instance_type.startswith("ml.")


async def _cached(app: AppContext, key: str, fn: Callable[[], T]) -> T:
    async def fetch() -> T:
        return await to_thread.run_sync(fn)

    value: T = await app.cache.get(key, fetch)
    return value


async def collect_status(app: AppContext, tag: str, claims: tuple[str, ...] = (DEFAULT_CLAIM,)) -> ClusterStatus:
    """Build the status of cluster `tag` from cached reads (one call per resource per cache interval).
    `claims` are the claim names (namespace default) that must be Bound for the cluster to be ready."""
    row = await to_thread.run_sync(get_cluster, app.db, tag)
    region, hp_name = row.region, row.hyperpod_cluster_name or f"hp-cluster-{tag}"
    problems: list[str] = []
    base = f"{region}:{row.eks_cluster_name}"
    hp_task = asyncio.ensure_future(hyperpod.cached_describe(app, region, hp_name))
    nodes: list[dict[str, Any]] = []
    used: dict[str, dict[str, int]] = {}
    pvcs: list[dict[str, Any]] = []
    reachable = True
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
        reachable = False
        problems.append(f"Kubernetes API of {row.eks_cluster_name} not reachable: {exc.message}")
        hp = await hp_task
    groups: list[GroupStatus] = []
    hp_status = "NOT_FOUND" if hp is None else str(hp.get("ClusterStatus", "UNKNOWN"))
    usable = [n for n in nodes if n["ready"] and n["schedulable"]]
    if hp is None:
        problems.append(f"HyperPod cluster {hp_name} does not exist (hyperpod_create creates it).")
    else:
        if hp_status != "InService":
            reason = f": {hp['FailureMessage']}" if hp.get("FailureMessage") else ""
            problems.append(f"HyperPod cluster {hp_name} is {hp_status}{reason}.")
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
    node_views = []
    totals: dict[str, dict[str, int]] = {}
    for n in nodes:
        alloc = used.get(n["name"], {"gpu": 0, "neuron": 0})
        node_views.append(
            NodeStatus(
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
        )
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
        kubernetes_reachable=reachable,
        hyperpod_cluster_name=hp_name,
        hyperpod_status=hp_status,
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


# -- the verification stage -----------------------------------------------------------------------------


async def stage_verification(stage: StageContext) -> dict[str, Any]:
    """Wait until the cluster verifies (nodes Ready/schedulable matching the instance groups, GPU totals,
    the storage claim Bound, dependencies healthy where recorded); fail with the remaining problems.
    The cluster row's stage "verification" says RUNNING, SUCCEEDED or FAILED."""
    tag = stage.params["clusterTag"]
    await mark(stage, tag, "verification", "RUNNING")
    try:
        return await _verify(stage, tag)
    except Exception:
        await mark(stage, tag, "verification", "FAILED")
        raise


async def _verify(stage: StageContext, tag: str) -> dict[str, Any]:
    p = stage.params
    claim = (p.get("storage") or {}).get("name") or DEFAULT_CLAIM
    limit = float(p.get("verifyWaitSeconds") or VERIFY_WAIT_SECONDS)
    deadline = time.monotonic() + limit
    last = ""
    while True:
        status = await collect_status(stage.app, tag, (claim,))
        if status.hyperpod_status in ("Failed", "Deleting", "NOT_FOUND"):
            raise PermanentError(
                status.problems[0] if status.problems else f"HyperPod cluster is {status.hyperpod_status}.",
                code="PRECONDITION_FAILED" if status.hyperpod_status == "NOT_FOUND" else "PROVIDER_ERROR",
                hint="Create the HyperPod cluster (hyperpod_create) or fix its failure, then retry this operation.",
            )
        if status.ready:
            break
        message = "verifying: " + "; ".join(status.problems)
        if message != last:
            await stage.progress(message[:2000])
            last = message
        if time.monotonic() > deadline:
            raise TemporaryError(
                f"The cluster did not verify within {limit:.0f}s: " + "; ".join(status.problems),
                code="VERIFICATION_FAILED",
                hint="cluster_get_status shows each problem; fix the one named (nodes, device plugin, storage "
                "claim, dependencies) and retry the operation (operation_retry).",
            )
        await asyncio.sleep(stage.app.settings.poll_seconds)
    summary = {
        "nodesReadySchedulable": status.nodes_ready_schedulable,
        "accelerators": [a.model_dump(by_alias=True) for a in status.accelerators],
        "storageClaim": claim,
        "dependenciesRecorded": status.dependencies_recorded,
    }
    await mark(stage, tag, "verification", "SUCCEEDED", verification=summary)
    await stage.progress(
        f"verified: {status.nodes_ready_schedulable} node(s) Ready and schedulable, "
        + ", ".join(f"{a.instance_type}: {a.gpu_total} GPU" for a in status.accelerators)
        + f", claim {claim} Bound"
    )
    return summary


VERIFICATION_STAGE = StageSpec(
    "verification", stage_verification, max_attempts=3, timeout_seconds=VERIFY_WAIT_SECONDS + 300, backoff_seconds=10
)
