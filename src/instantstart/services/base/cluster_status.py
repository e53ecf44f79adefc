"""Cluster status: a bounded summary of nodes, GPUs, storage and dependencies, from the cluster's watches
(Kubernetes) and the describe cache (HyperPod). A shared read: cluster_get_status (services/cluster/status.py),
the verification stage and inference sizing build it here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from anyio import to_thread

from instantstart.aws import identity
from instantstart.context import AppContext
from instantstart.errors import (
    InstantStartError,
)
from instantstart.kube.calls import kube_api
from instantstart.kube.gateway import Api
from instantstart.manifests.storage import DEFAULT_CLAIM, DEFAULT_NAMESPACE
from instantstart.services.base.deletion_record import deletion_problems
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_reads import cached_describe
from instantstart.services.base.lifecycle import approved_scripts, lifecycle_problems
from instantstart.services.base.registry import get_cluster, hyperpod_cluster_name
from instantstart.services.base.status_model import (
    AcceleratorTotals,
    ClaimStatus,
    ClusterStatus,
    GroupStatus,
    WatchFreshness,
    dependency_health,
    latest_operation,
)
from instantstart.services.base.watch.digest import NodeDigest, node_status
from instantstart.services.base.watch.state import Freshness, cached_db
from instantstart.services.base.watch.view import node_state
from instantstart.store.models import ClusterRow, utcnow

T = TypeVar("T")

VERIFY_WAIT_SECONDS = 20 * 60
DEFAULT_NODE_LIMIT = 10
MAX_PROBLEMS = 20
# Classic-mode clusters undo a change whose instances failed (FACTS: ClusterStatus RollingBack, then InService).
ROLLING_BACK_HINT = (
    " HyperPod is undoing a change whose instances could not be provisioned and returns to InService at the"
    " previous counts; cluster_events names the failed instances. Fix the cause (capacity, AZ, instance type,"
    " lifecycle script), then repeat the change once the cluster is InService."
)
ACCOUNT_SECONDS = 3600.0  # the credentials' account id, for ExpectedBucketOwner on the lifecycle script read


def _api_or_error(app: AppContext, row: ClusterRow) -> Api | InstantStartError:
    """The ApiClient, or why there is none (cached either way, so an EKS cluster that is not ACTIVE yet
    costs one DescribeCluster per cache interval however many callers poll)."""
    try:
        return kube_api(app.kube, row.eks_cluster_name, row.region)
    except InstantStartError as exc:
        return exc


async def _cached(app: AppContext, key: str, fn: Callable[[], T]) -> T:
    return await _cached_for(app, key, None, fn)


async def _cached_for(app: AppContext, key: str, ttl: float | None, fn: Callable[[], T]) -> T:
    async def fetch() -> T:
        return await to_thread.run_sync(fn)

    value: T = await app.cache.get(key, fetch, ttl)
    return value


async def _reads(
    app: AppContext, row: ClusterRow, hp_name: str, ttl: float
) -> tuple[dict[str, Any] | None, NodeDigest, list[dict[str, Any]], Freshness | None, str | None]:
    """HyperPod's DescribeCluster (cached for `ttl`) and the Kubernetes state from the cluster's watches (node
    digest, claims, freshness); the last item says why Kubernetes was not reachable (None when it was)."""
    base = f"{row.region}:{row.eks_cluster_name}"
    hp_task = asyncio.ensure_future(cached_describe(app, row.region, hp_name, ttl))
    try:
        api_or_error = await _cached(app, f"kubeapi:{base}", lambda: _api_or_error(app, row))
        if isinstance(api_or_error, InstantStartError):
            raise api_or_error
        hp, (nodes, pvcs, fresh) = await asyncio.gather(hp_task, node_state(app, row))
    except InstantStartError as exc:
        return await hp_task, NodeDigest(), [], None, exc.message
    return hp, nodes, pvcs, fresh, None


def _groups(hp: dict[str, Any] | None, hp_name: str, nodes: NodeDigest, problems: list[str]) -> list[GroupStatus]:
    """Each HyperPod instance group's counts against its Ready, schedulable Kubernetes nodes."""
    if hp is None:
        problems.append(f"HyperPod cluster {hp_name} does not exist (hyperpod_create creates it).")
        return []
    hp_status = str(hp.get("ClusterStatus", "UNKNOWN"))
    if hp_status != "InService":
        reason = f": {hp['FailureMessage']}" if hp.get("FailureMessage") else ""
        hint = ROLLING_BACK_HINT if hp_status == "RollingBack" else ""
        problems.append(f"HyperPod cluster {hp_name} is {hp_status}{reason}.{hint}")
    groups = []
    for g in hp.get("InstanceGroups") or []:
        name = g.get("InstanceGroupName", "")
        current, target = int(g.get("CurrentCount") or 0), int(g.get("TargetCount", g.get("CurrentCount")) or 0)
        k8s_ok = nodes.usable_by_group[(name, None)] + nodes.usable_by_group[(name, hp_name)]
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


async def _lifecycle(app: AppContext, row: ClusterRow, hp: dict[str, Any] | None, ttl: float) -> list[str]:
    """A lifecycle script changed behind our back (auto-recovery and Karpenter would run it as root), with the
    fix; checked once per describe interval like HyperPod's state."""
    groups = list((hp or {}).get("InstanceGroups") or [])
    bucket = facts_of(row).bucket
    if not bucket or not groups:
        return []  # nothing of ours to check (no HyperPod cluster yet, or an imported one)

    async def fetch() -> list[str]:
        # The account (ExpectedBucketOwner) of the same credentials: read once an hour, not per status interval.
        account = await _cached_for(app, f"sts:{row.region}:account", ACCOUNT_SECONDS,
                                    lambda: identity.account_id(app.aws, row.region))
        return await to_thread.run_sync(lifecycle_problems, app.aws, row.region, bucket, row.tag, groups, account,
                                        approved_scripts(facts_of(row)))

    try:
        found: list[str] = await app.cache.get(f"s3:{row.region}:lifecycle:{row.tag}", fetch, ttl)
    except InstantStartError as exc:
        return [f"lifecycle scripts of {row.tag} could not be verified: {exc.message}"]
    return found


def _accelerators(nodes: NodeDigest) -> list[AcceleratorTotals]:
    """Accelerator totals per instance type, from the digest."""
    return [
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
        for k, v in nodes.totals.items()
    ]


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


async def collect_status(
    app: AppContext, tag: str, claims: tuple[str, ...] = (DEFAULT_CLAIM,), node_limit: int = DEFAULT_NODE_LIMIT
) -> ClusterStatus:
    """Build the status of cluster `tag`: HyperPod from the describe cache, Kubernetes from the cluster's
    watches (served from memory; stale-marked while a watch is down). `claims` are the claim names
    (namespace default) that must be Bound for the cluster to be ready; at most `node_limit` nodes are
    listed, those needing attention first."""
    row: ClusterRow = await cached_db(app, f"row:{tag}", lambda: get_cluster(app.db, tag))
    region, hp_name = row.region, hyperpod_cluster_name(row)
    latest = await cached_db(app, f"latest-op:{tag}", lambda: latest_operation(app, tag))
    settings = app.settings
    # The describe interval adapts: short while an operation changes the cluster, long while it is idle.
    idle = settings.status_idle_cache_seconds
    idle = 3 * settings.status_cache_seconds if idle is None else max(idle, settings.status_cache_seconds)
    ttl = settings.status_cache_seconds if latest is not None and not latest.terminal else idle
    problems: list[str] = deletion_problems(row)
    hp, nodes, pvcs, fresh, unreachable = await _reads(app, row, hp_name, ttl)
    if unreachable is not None:
        problems.append(f"Kubernetes API of {row.eks_cluster_name} not reachable: {unreachable}")
    stale = None if fresh is None else fresh.stale_note(row.eks_cluster_name)
    if stale is not None:
        problems.append(stale)
    groups = _groups(hp, hp_name, nodes, problems)
    problems.extend(await _lifecycle(app, row, hp, ttl))
    problems.extend(nodes.problems)
    storage = _storage(pvcs, claims, unreachable is None, problems)
    recorded, deps = dependency_health(facts_of(row))
    problems.extend(
        f"dependency {d.name} is {d.status}{': ' + d.message if d.message else ''}." for d in deps if not d.healthy
    )
    listed = nodes.attention[:node_limit]
    return ClusterStatus(
        cluster_tag=tag,
        region=region,
        ready=not problems,
        problems=problems[:MAX_PROBLEMS],
        problems_omitted=max(len(problems) - MAX_PROBLEMS, 0),
        stages=dict(row.stages or {}),
        latest_operation=latest,
        kubernetes_reachable=unreachable is None,
        hyperpod_cluster_name=hp_name,
        hyperpod_status="NOT_FOUND" if hp is None else str(hp.get("ClusterStatus", "UNKNOWN")),
        instance_groups=groups,
        nodes=[node_status(n) for n in listed],
        nodes_omitted=nodes.node_count - len(listed),
        nodes_unhealthy=nodes.unhealthy_count,
        watch=None if fresh is None else WatchFreshness.model_validate(fresh.as_dict()),
        node_count=nodes.node_count,
        nodes_ready_schedulable=nodes.usable_count,
        accelerators=_accelerators(nodes),
        storage=storage,
        dependencies_recorded=recorded,
        dependencies=deps,
        checked_at=utcnow(),
    )
