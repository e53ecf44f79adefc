"""`monitoring_gpu_utilization`: GPU utilisation from the observability add-on's AMP workspace (PromQL), bounded,
with the links to the workspace and to Amazon Managed Grafana."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws import amp_query
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.operations.waiting import blocking
from instantstart.services.base.observability import METRIC, grafana_workspace, observability_workspace
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

MAX_NODES = 50
POINTS = 60


class GpuUtilizationRequest(WireModel):
    """Which cluster and how far back."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Default: the active cluster.")
    range_minutes: int = Field(default=60, ge=5, le=10080, description="How far back the series goes (5..10080).")


class ObservabilityLinks(WireModel):
    """The observability add-on's AMP workspace and where to look at it."""

    enabled: bool = Field(description="True when the observability feature is on (its AMP workspace is ACTIVE).")
    reason: str | None = Field(default=None, description="Why it is off, and how to turn it on.")
    workspace_id: str | None = None
    workspace_arn: str | None = None
    query_url: str | None = Field(default=None, description="The workspace's Prometheus query endpoint.")
    prometheus_console_url: str | None = Field(default=None, description="The workspace in the AMP console.")
    grafana_console_url: str | None = Field(
        default=None, description="Amazon Managed Grafana in the Region: add the workspace there as a data source."
    )
    grafana_workspace_id: str | None = Field(
        default=None, description="The observability feature's Amazon Managed Grafana workspace (adopted or created), "
        "when it has one."
    )
    grafana_workspace_url: str | None = Field(
        default=None, description="That workspace's sign-in URL (https://<endpoint>), when it is ACTIVE."
    )
    grafana_url: str | None = Field(
        default=None, description="Where to look at the metrics in Grafana: the workspace URL when known, else the "
        "Amazon Managed Grafana console."
    )


class GpuPoint(WireModel):
    """One sample of the cluster's mean GPU utilisation."""

    at: datetime
    percent: float


class GpuGroup(WireModel):
    """Mean utilisation now of one node or one instance type."""

    name: str
    percent: float
    gpus: int = Field(description="GPUs reporting.")


class GpuUtilization(WireModel):
    """GPU utilisation (DCGM_FI_DEV_GPU_UTIL, percent) from the workspace: now, per node and type, and a series."""

    cluster_tag: str
    observability: ObservabilityLinks
    step_seconds: int | None = None
    mean_percent: float | None = Field(default=None, description="Mean over every GPU reporting now.")
    gpus_reporting: int = 0
    series: list[GpuPoint] = Field(default_factory=list, description=f"The mean over time (≤ {POINTS} points).")
    by_instance_type: list[GpuGroup] = Field(default_factory=list)
    by_node: list[GpuGroup] = Field(
        default_factory=list, description=f"Busiest first, at most {MAX_NODES} nodes (nodesTotal has the count)."
    )
    nodes_total: int = 0


def links(region: str, workspace: dict[str, Any] | None, off_reason: str | None,
          grafana_workspace: dict[str, Any] | None = None) -> ObservabilityLinks:
    """The links of a workspace (None or a reason: the feature is off), with the Grafana workspace's URL when the
    feature has one (its summary, see base/observability.py:summary) and it is ACTIVE."""
    if workspace is None or off_reason:
        return ObservabilityLinks(enabled=False, reason=off_reason or "The observability feature is off.")
    wid = str(workspace["workspaceId"])
    endpoint = str(workspace.get("prometheusEndpoint") or "")
    console = f"https://{region}.console.aws.amazon.com"
    grafana_console = f"{console}/grafana/home?region={region}#/workspaces"
    grafana_ws = grafana_workspace or {}
    grafana_url = grafana_ws.get("url") if grafana_ws.get("status") == "ACTIVE" else None
    return ObservabilityLinks(
        enabled=True, workspace_id=wid, workspace_arn=workspace.get("arn"),
        query_url=f"{endpoint.rstrip('/')}/api/v1/query" if endpoint else None,
        prometheus_console_url=f"{console}/prometheus/home?region={region}#/workspaces/workspace/{wid}",
        grafana_console_url=grafana_console, grafana_workspace_id=grafana_ws.get("workspaceId"),
        grafana_workspace_url=grafana_url, grafana_url=grafana_url or grafana_console,
    )


def _vector(data: dict[str, Any]) -> list[tuple[dict[str, str], float]]:
    return [(dict(r.get("metric") or {}), float(r["value"][1])) for r in data.get("result") or []]


def _read(app: AppContext, row: ClusterRow, workspace: dict[str, Any], minutes: int) -> dict[str, Any]:
    """The view's PromQL queries (blocking). Instant queries are evaluated at the workspace's own "now", and the
    range ends there too (the time of the first answer's sample), so a skewed local clock shifts nothing."""
    base = amp_query.workspace_url(app.aws, row.region, str(workspace["workspaceId"]),
                                   workspace.get("prometheusEndpoint"))
    step = max(15, (minutes * 60) // POINTS)

    def ask(q: str, at: float | None = None) -> dict[str, Any]:
        params = {"query": q} if at is None else {"query": q, "time": f"{at:.3f}"}
        return amp_query.query(app.aws, row.region, base, "query", params)

    first = ask(f"avg({METRIC})")
    samples = first.get("result") or []
    if samples:
        now = float(samples[0]["value"][0])
    else:
        now = datetime.now(UTC).timestamp()
        first = ask(f"avg({METRIC})", now)
    by_type = _vector(ask(f"avg by (instance_type) ({METRIC})", now))
    by_node = _vector(ask(f"avg by (Hostname) ({METRIC})", now))
    gpus_by_type = {m.get("instance_type", ""): int(v)
                    for m, v in _vector(ask(f"count by (instance_type) ({METRIC})", now))}
    gpus_by_node = {m.get("Hostname", ""): int(v) for m, v in _vector(ask(f"count by (Hostname) ({METRIC})", now))}
    ranged = amp_query.query(app.aws, row.region, base, "query_range", {
        "query": f"avg({METRIC})", "start": f"{now - minutes * 60:.3f}", "end": f"{now:.3f}", "step": str(step),
    })
    result = ranged.get("result") or []
    values = (result[0].get("values") or []) if result else []
    return {"overall": _vector(first), "count": sum(gpus_by_type.values()), "byType": by_type, "byNode": by_node,
            "step": step, "gpusByType": gpus_by_type, "gpusByNode": gpus_by_node, "values": values[-POINTS:]}


@operation("monitoring_gpu_utilization", method="GET", path="/monitoring/gpu-utilization",
           example={"rangeMinutes": 60})
async def monitoring_gpu_utilization(ctx: CallContext, req: GpuUtilizationRequest) -> GpuUtilization:
    """Read-only, bounded: GPU utilisation of a cluster (default: the active one) from the observability
    add-on's Amazon Managed Prometheus workspace (PromQL over DCGM_FI_DEV_GPU_UTIL): the mean now, per
    instance type, per node (busiest first, at most 50), and the mean over the last rangeMinutes (≤ 60
    points). Also the links to the workspace in the AMP console and to Grafana: the feature's Amazon Managed
    Grafana workspace (https://<endpoint>) when it has an ACTIVE one, else the Amazon Managed Grafana console.
    When the observability feature is off, `observability.reason` says so and how to turn it on."""
    app = ctx.app
    tag = await to_thread.run_sync(resolve_tag, app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, app.db, tag)
    workspace, off = await observability_workspace(app, row)
    found = links(row.region, workspace, off, await grafana_workspace(app, row) if workspace is not None else None)
    if workspace is None:
        return GpuUtilization(cluster_tag=tag, observability=found)
    got = await blocking(_read, app, row, workspace, req.range_minutes)
    nodes = sorted(
        (GpuGroup(name=m.get("Hostname", ""), percent=round(v, 1), gpus=got["gpusByNode"].get(m.get("Hostname", ""), 0))
         for m, v in got["byNode"]),
        key=lambda g: (-g.percent, g.name),
    )
    return GpuUtilization(
        cluster_tag=tag, observability=found, step_seconds=got["step"],
        mean_percent=round(got["overall"][0][1], 1) if got["overall"] else None,
        gpus_reporting=got["count"],
        series=[GpuPoint(at=datetime.fromtimestamp(float(t), UTC), percent=round(float(v), 1))
                for t, v in got["values"]],
        by_instance_type=[
            GpuGroup(name=m.get("instance_type", "") or "unknown", percent=round(v, 1),
                     gpus=got["gpusByType"].get(m.get("instance_type", ""), 0))
            for m, v in got["byType"]
        ],
        by_node=nodes[:MAX_NODES], nodes_total=len(nodes),
    )
