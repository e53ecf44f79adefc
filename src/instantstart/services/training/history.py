"""training_history: runs and their metric histories from the cluster's MLflow tracking server (REST API, signed),
bounded for an agent's context."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws import mlflow as mlflow_api
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import NotFound, PreconditionFailed
from instantstart.operations.waiting import blocking
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.services.training.mlflow import mlflow_config
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag, KubeName

JOB_TAG = "instantstart.job"  # the run tag naming the training job (set by jobs submitted with mlflow)
MAX_METRICS = 10


class HistoryRequest(WireModel):
    """Whose runs: an experiment, a job, or the latest of all."""

    experiment: str | None = Field(default=None, min_length=1, max_length=500,
                                   description="The MLflow experiment name (as given in `mlflow.experiment`).")
    job_name: KubeName | None = Field(default=None, description="Only the runs of this training job.")
    max_runs: int = Field(default=10, ge=1, le=50, description="At most this many runs, newest first.")
    max_points: int = Field(default=100, ge=1, le=1000, description="At most this many points per metric "
                            "(the latest).")
    cluster_tag: ClusterTag | None = None


class MetricPoint(WireModel):
    """One logged value."""

    step: int
    value: float
    timestamp: int


class RunView(WireModel):
    """One MLflow run: identity, state, latest metrics and their histories."""

    run_id: str
    run_name: str | None = None
    job_name: str | None = None
    experiment_id: str
    status: str
    start_time: int | None = None
    end_time: int | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    history: dict[str, list[MetricPoint]] = Field(default_factory=dict)


class HistoryAnswer(WireModel):
    """Runs from the tracking server, newest first."""

    tracking_server_name: str
    experiment: str | None = None
    runs: list[RunView]
    truncated: bool = Field(description="More runs matched than maxRuns, or points/metrics were cut.")


def _not_configured(tag: str) -> PreconditionFailed:
    return PreconditionFailed(f"MLflow is not configured for cluster {tag}.",
                              hint=f"Run mlflow_configure (clusterTag {tag}) first; it creates or attaches the "
                              "tracking server and the training pods' identity.")


def _history(app: AppContext, row: ClusterRow, tag: str, req: HistoryRequest) -> HistoryAnswer:
    config = mlflow_config(app.db, tag)
    if config is None:
        raise _not_configured(tag)
    name = str(config["trackingServerName"])
    found = mlflow_api.describe_server(app.aws, row.region, name)
    if found is None or not found.get("TrackingServerUrl"):
        raise PreconditionFailed(f"MLflow tracking server {name} of cluster {tag} is gone or has no URL.",
                                 hint="Run mlflow_configure again.")
    url = str(found["TrackingServerUrl"])

    def rest(path: str, **kw: Any) -> dict[str, Any]:
        return mlflow_api.rest(app.aws, row.region, url, path, **kw)

    if req.experiment:
        try:
            experiment_ids = [str(rest("experiments/get-by-name", params={"experiment_name": req.experiment})[
                "experiment"]["experiment_id"])]
        except NotFound:
            names = [e["name"] for e in rest("experiments/search", body={"max_results": 50}).get("experiments", [])]
            raise NotFound(f"No MLflow experiment {req.experiment!r} on tracking server {name}.",
                           hint=f"Experiments there: {', '.join(names) or 'none'}.") from None
    else:
        experiments = rest("experiments/search", body={"max_results": 1000}).get("experiments", [])
        experiment_ids = [str(e["experiment_id"]) for e in experiments]
    if not experiment_ids:
        return HistoryAnswer(tracking_server_name=name, experiment=req.experiment, runs=[], truncated=False)
    body: dict[str, Any] = {"experiment_ids": experiment_ids, "max_results": req.max_runs,
                            "order_by": ["attributes.start_time DESC"]}
    if req.job_name:
        body["filter"] = f"tags.`{JOB_TAG}` = '{req.job_name}'"
    searched = rest("runs/search", body=body)
    truncated = bool(searched.get("next_page_token"))
    runs = []
    for run in searched.get("runs", []):
        info, data = run["info"], run.get("data") or {}
        tags = {t["key"]: t["value"] for t in data.get("tags") or []}
        latest = {m["key"]: float(m["value"]) for m in data.get("metrics") or []}
        keys = sorted(latest)[:MAX_METRICS]
        truncated = truncated or len(latest) > MAX_METRICS
        history: dict[str, list[MetricPoint]] = {}
        for key in keys:
            points = rest("metrics/get-history", params={"run_id": info["run_id"], "metric_key": key}).get(
                "metrics", [])
            points.sort(key=lambda m: (int(m.get("step", 0)), int(m.get("timestamp", 0))))
            truncated = truncated or len(points) > req.max_points
            history[key] = [MetricPoint(step=int(m.get("step", 0)), value=float(m["value"]),
                                        timestamp=int(m.get("timestamp", 0))) for m in points[-req.max_points:]]
        runs.append(RunView(
            run_id=str(info["run_id"]), run_name=info.get("run_name"), job_name=tags.get(JOB_TAG),
            experiment_id=str(info["experiment_id"]), status=str(info.get("status")),
            start_time=info.get("start_time"), end_time=info.get("end_time"),
            metrics={k: latest[k] for k in keys}, history=history))
    return HistoryAnswer(tracking_server_name=name, experiment=req.experiment, runs=runs, truncated=truncated)


@operation("training_history", method="GET", path="/training/history", example={})
async def training_history(ctx: CallContext, req: HistoryRequest) -> HistoryAnswer:
    """Runs and their metrics from the cluster's MLflow tracking server (mlflow_configure made it): those of
    `experiment` and/or `jobName`, newest first, at most maxRuns runs, 10 metrics and maxPoints points per metric.
    Read through the MLflow REST API, SigV4-signed for sagemaker-mlflow. Read-only."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    return await blocking(_history, ctx.app, row, tag, req)
