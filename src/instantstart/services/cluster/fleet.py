"""The fleet: every managed cluster with its health, from the watches that run, without starting or keeping any.

A cluster's status watches (nodes, pods, claims) start on its first read (cluster_get_status, node_list, ...)
and park after `watch_idle_seconds` unread (kube.watch_types.Informers.reap): a fleet of many clusters only
holds the clusters someone looks at. cluster_list_all reads what the running watches hold (a peek, not a read:
listing the fleet never keeps a cluster watched) and shows a parked cluster's last numbers with their age;
cluster_get_status with its clusterTag resumes its watches.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.context import AppContext, CallContext, Slot
from instantstart.kube.informers import Informer
from instantstart.services.base.registry import ClusterSummary, list_clusters
from instantstart.services.base.watch.projections import JOB_POD_LABELS
from instantstart.services.base.watch.state import STATUS_KINDS, cached_db, freshness, informer_key, memoised
from instantstart.services.base.watch.view import watched_digest
from instantstart.store import alerts as alert_store
from instantstart.store.models import utcnow

Obj = dict[str, Any]
HealthState = Literal["healthy", "degraded", "unknown"]
WatchState = Literal["live", "stale", "starting", "parked", "unwatched"]
HEALTH_HELP = ("healthy: watched, every node usable, no open alert; degraded: an open alert, a node needing "
               "attention or a watch down; unknown: not watched now (parked or never read since the server "
               "started: cluster_get_status with its clusterTag resumes it).")


class ClusterNumbers(WireModel):
    """A cluster's Kubernetes figures as its watches last held them."""

    nodes: int
    nodes_usable: int = Field(description="Ready and schedulable.")
    nodes_unhealthy: int = Field(description="Not Ready, not schedulable, or HyperPod reports a problem.")
    gpu_total: int
    gpu_allocated: int = Field(description="Requested by non-terminated pods.")
    gpu_free: int = Field(description="Unrequested on usable nodes.")
    running_jobs: int = Field(description="Jobs (training, Ray) with at least one Running pod.")
    as_of: datetime = Field(description="When the watches held these figures (now while watched).")


class ClusterHealth(WireModel):
    """One cluster's health in the fleet."""

    state: HealthState = Field(description=HEALTH_HELP)
    watch: WatchState = Field(
        description="live: watched and current; stale: a watch is down (the last state is shown); starting: the "
        "first list is under way; parked: unread for watchIdleSeconds, its watches stopped (the figures are the "
        "last ones, of asOf); unwatched: not read since the server started (no figures).")
    open_alerts: int
    numbers: ClusterNumbers | None = Field(description="None while the cluster was never watched.")


class FleetCluster(ClusterSummary):
    """One managed cluster as cluster_list_all shows it: its record and its health."""

    health: ClusterHealth


class FleetListResult(WireModel):
    """Every managed cluster with its health, and which one is active."""

    clusters: list[FleetCluster]
    active_cluster: str | None
    count: int
    watched: int = Field(description="Clusters whose watches run now.")
    watch_idle_seconds: float = Field(description="A cluster's watches park after this long unread.")


LAST: Slot[dict[str, ClusterNumbers]] = Slot("fleet figures")  # per application: {tag: last figures watched}


def running_jobs(pods: dict[str, Obj]) -> int:
    """Distinct jobs (namespace and the first job label a pod carries) with at least one Running pod."""
    jobs = set()
    for pod in pods.values():
        if pod.get("phase") != "Running":
            continue
        labels = pod.get("labels") or {}
        label = next((k for k in JOB_POD_LABELS if k in labels), None)
        if label is not None:
            jobs.add((pod["namespace"], label, labels[label]))
    return len(jobs)


def _numbers(nodes: Informer, pods: Informer) -> ClusterNumbers:
    digest = watched_digest(nodes, pods)
    jobs: int = memoised(pods, "fleet-jobs", (pods.version,), lambda: running_jobs(pods.snapshot()[1]))
    totals = digest.totals.values()
    return ClusterNumbers(
        nodes=digest.node_count,
        nodes_usable=digest.usable_count,
        nodes_unhealthy=digest.unhealthy_count,
        gpu_total=sum(t["gpu"] for t in totals),
        gpu_allocated=sum(t["gpuUsed"] for t in totals),
        gpu_free=sum(t["gpuFree"] for t in totals),
        running_jobs=jobs,
        as_of=utcnow(),
    )


def cluster_health(app: AppContext, row: ClusterSummary, alerts: int) -> ClusterHealth:
    """The cluster's health from its running watches (peeked: this is not a read that keeps them), else its last
    figures while parked; in memory, never blocking."""
    keys = [informer_key(row.region, row.eks_cluster_name, kind) for kind in STATUS_KINDS]
    running = [app.informers.peek(key) for key in keys]
    last = app.owned.get(LAST, dict)
    watch: WatchState
    numbers: ClusterNumbers | None
    infs = [i for i in running if i is not None]
    if len(infs) == len(keys) and all(i.settled.is_set() for i in infs):
        watch = "stale" if freshness(infs).stale else "live"
        numbers = last[row.cluster_tag] = _numbers(infs[0], infs[1])
    else:  # a kind missing (the alert evaluator may watch the pods alone) or the first list under way
        numbers = last.get(row.cluster_tag)
        parked = any(key in app.informers.parked for key in keys)
        watch = "starting" if len(infs) == len(keys) else "parked" if parked else "unwatched"
    sick = numbers is not None and numbers.nodes_unhealthy > 0 and watch in ("live", "stale")
    state: HealthState = "healthy" if watch == "live" else "unknown"
    if alerts or sick or watch == "stale":
        state = "degraded"
    return ClusterHealth(state=state, watch=watch, open_alerts=alerts, numbers=numbers)


async def fleet(app: AppContext) -> FleetListResult:
    """Every cluster with its health: the registry and the open alerts through the status-path database cache
    (one read a second however many pollers), the Kubernetes figures from memory; parks idle watches first."""
    app.informers.reap()
    listed = await cached_db(app, "fleet:clusters", lambda: list_clusters(app.db))
    alerts: dict[str, int] = await cached_db(app, "fleet:alerts", lambda: alert_store.open_counts(app.db))
    items = [
        FleetCluster(**c.model_dump(), health=cluster_health(app, c, alerts.get(c.cluster_tag, 0)))
        for c in listed.clusters
    ]
    last, tags = app.owned.get(LAST, dict), {c.cluster_tag for c in listed.clusters}
    for gone in [tag for tag in last if tag not in tags]:  # a deleted cluster's figures go with it
        last.pop(gone, None)
    return FleetListResult(
        clusters=items,
        active_cluster=listed.active_cluster,
        count=len(items),
        watched=sum(1 for c in items if c.health.watch in ("live", "stale", "starting")),
        watch_idle_seconds=app.informers.idle_seconds,
    )


@operation("cluster_list_all", method="GET", path="/clusters")
async def cluster_list_all(ctx: CallContext, req: NoInput) -> FleetListResult:
    """Every managed cluster with its stage statuses, which one is active, and its health: health.state
    (healthy, degraded, unknown), open alerts, and from the cluster's watches its nodes (usable, needing
    attention), GPUs (total, allocated, free) and running jobs. Listing never starts or keeps a watch: a
    cluster nobody read for watchIdleSeconds is parked (its last figures, with their age); cluster_get_status
    with its clusterTag resumes it."""
    return await fleet(ctx.app)
