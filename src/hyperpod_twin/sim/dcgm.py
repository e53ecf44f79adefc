"""Simulated DCGM exporter series and an AMP workspace's Prometheus-compatible query API over them.

The HyperPod observability add-on scrapes NVIDIA DCGM metrics into the cluster's Amazon Managed Service for
Prometheus workspace. The twin derives them instead: every GPU a Ready node advertises reports
`DCGM_FI_DEV_GPU_UTIL` (labels `Hostname`, `gpu`, `UUID`, `modelName`, `instance_type`, and the holding
pod's `namespace`/`pod` while a running pod holds it). A held GPU is busy (85-99 %) from the pod's start
(1 % when the pod is annotated twin.instantstart.io/gpu-idle: a job that holds GPUs and does nothing), an idle one
reports 0. Queries: a selector `name{label op "value", …}` or `sum|avg|max|min|count [by (l, …)]
(selector)`; `/api/v1/query` (instant) and `/api/v1/query_range`, answered as Prometheus does."""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from hyperpod_twin.aws.protocol import AwsError, AwsRequest, RawResponse
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import NODES, PODS
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.promql import QueryError, Series, vector

GPU = "nvidia.com/gpu"
MAX_POINTS = 11000  # Prometheus' limit of points per series in a range query
OBSERVABILITY_ADDON = "amazon-sagemaker-hyperpod-observability"
QUERY_PATH = re.compile(r"^/workspaces/([^/]+)/api/v1/(query|query_range)$")


def _utilisation(uuid: str, t: float) -> float:
    """A busy GPU's utilisation at `t`: 85-99 %, varying smoothly per GPU."""
    phase = (zlib.crc32(uuid.encode()) % 628) / 100.0
    return round(92.0 + 7.0 * math.sin(t / 97.0 + phase), 1)


def series_at(sim: ClusterSim, t: float) -> list[Series]:
    """Every simulated DCGM series of the cluster at twin time `t`."""
    holders: dict[str, list[Obj]] = {}
    for pod in sim.list(PODS):
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") == "Running" and kobj.pod_requests(pod).get(GPU):
            holders.setdefault(node, []).append(pod)
    out: list[Series] = []
    for node in sim.list(NODES):
        if not kobj.is_true(node, "Ready"):
            continue
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        gpus = int(kobj.quantity(((node.get("status") or {}).get("allocatable") or {}).get(GPU, "0")))
        slots: list[Obj | None] = []
        for pod in sorted(holders.get(name, []), key=lambda p: p["metadata"]["name"]):
            slots += [pod] * int(kobj.pod_requests(pod)[GPU])
        for index in range(gpus):
            uuid = f"GPU-{zlib.crc32(f'{name}/{index}'.encode()):08x}"
            base = {"Hostname": name, "gpu": str(index), "UUID": uuid, "modelName": "NVIDIA H100 80GB HBM3",
                    "instance_type": str(labels.get("node.kubernetes.io/instance-type", ""))}
            holder = slots[index] if index < len(slots) else None
            started = kobj.parse_time((holder or {}).get("status", {}).get("startTime")) if holder else None
            if holder is not None and (started is None or started <= t):
                base |= {"namespace": holder["metadata"]["namespace"], "pod": holder["metadata"]["name"]}
                idle = kobj.annotation(holder, kobj.GPU_IDLE).lower() in ("true", "1", "yes")
                out.append(("DCGM_FI_DEV_GPU_UTIL", base, 1.0 if idle else _utilisation(uuid, t)))
            else:
                out.append(("DCGM_FI_DEV_GPU_UTIL", base, 0.0))
    return out


def _number(params: dict[str, str], name: str, default: float | None = None) -> float:
    raw = params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise QueryError(f"missing parameter {name!r}")
        return default
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise QueryError(f'invalid parameter "{name}": cannot parse "{raw}" to a valid timestamp') from exc


def _value(v: float) -> str:
    return f"{v:.6g}" if not float(v).is_integer() else str(int(v))


def answer(kind: str, params: dict[str, str], sims: list[ClusterSim], now: float) -> dict[str, Any]:
    """The Prometheus HTTP API answer of an instant (`query`) or range (`query_range`) query."""
    query = params.get("query") or ""
    if not query:
        raise QueryError("missing parameter 'query'")

    def at(t: float) -> list[tuple[dict[str, str], float]]:
        return vector(query, [s for sim in sims for s in series_at(sim, t)])

    if kind == "query":
        t = _number(params, "time", now)
        return {"resultType": "vector",
                "result": [{"metric": labels, "value": [t, _value(v)]} for labels, v in at(t)]}
    start, end, step = _number(params, "start"), _number(params, "end"), _number(params, "step")
    if step <= 0:
        raise QueryError("zero or negative query resolution step widths are not accepted. Try a positive integer")
    if end < start:
        raise QueryError("end timestamp must not be before start time")
    if (end - start) / step > MAX_POINTS:
        raise QueryError("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query "
                       "resolution (?step=XX)")
    matrix: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
    t = start
    while t <= end:
        for labels, v in at(t):
            matrix.setdefault(tuple(sorted(labels.items())), []).append([t, _value(v)])
        t += step
    return {"resultType": "matrix",
            "result": [{"metric": dict(key), "values": values} for key, values in sorted(matrix.items())]}


def workspace_of(configuration_values: Any) -> str | None:
    """The AMP workspace id an observability add-on's configurationValues remote-write to."""
    try:
        values = json.loads(configuration_values) if isinstance(configuration_values, str) else configuration_values
        arn = str(((values or {}).get("ampWorkspace") or {}).get("arn") or "")
    except (ValueError, AttributeError):
        return None
    return arn.rsplit("/", 1)[-1] if "workspace/" in arn else None


def handle(req: AwsRequest, sims_of: Callable[[str], list[ClusterSim]], now: float) -> RawResponse:
    """Serve `/workspaces/{id}/api/v1/query[_range]` (GET query string or POST form) from the clusters whose
    observability add-on writes to that workspace (none: an empty result, as a workspace nobody writes to)."""
    found = QUERY_PATH.match(req.path)
    assert found is not None
    params = {k: v[0] for k, v in req.query.items()}
    if req.method == "POST" and req.body:
        params |= {k: v[0] for k, v in parse_qs(req.body.decode("utf-8", "replace")).items()}
    try:
        data = answer(found.group(2), params, sims_of(found.group(1)), now)
    except QueryError as exc:
        body = {"status": "error", "errorType": "bad_data", "error": str(exc)}
        return RawResponse(400, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return RawResponse(200, json.dumps({"status": "success", "data": data}).encode(),
                       {"Content-Type": "application/json"})


class WorkspaceQueries:
    """Which clusters' observability add-on writes to which AMP workspace; answers the workspace's queries."""

    def __init__(self, aws_ctx: Any, sim_for: Callable[[str], ClusterSim | None]) -> None:
        self.ctx = aws_ctx
        self.sim_for = sim_for
        self.writers: dict[str, set[str]] = {}  # workspace id → EKS cluster ARNs

    def on_addon_active(self, arn: str = "", addon_name: str = "", configuration_values: Any = None,
                        **_: Any) -> None:
        """The observability add-on (re)configured: remember the workspace it writes to."""
        if addon_name != OBSERVABILITY_ADDON:
            return
        for arns in self.writers.values():
            arns.discard(arn)
        workspace = workspace_of(configuration_values)
        if workspace:
            self.writers.setdefault(workspace, set()).add(arn)

    def on_addon_deleted(self, cluster_arn: str = "", addon_name: str = "", **_: Any) -> None:
        """The observability add-on went: its cluster no longer writes anywhere."""
        if addon_name == OBSERVABILITY_ADDON:
            for arns in self.writers.values():
                arns.discard(cluster_arn)

    def on_reset(self, **_: Any) -> None:
        """Forget every mapping."""
        self.writers.clear()

    def sims(self, workspace: str) -> list[ClusterSim]:
        """The running simulators of the clusters writing to `workspace`."""
        found = (self.sim_for(arn) for arn in sorted(self.writers.get(workspace, set())))
        return [s for s in found if s is not None]

    def __call__(self, req: AwsRequest) -> RawResponse:
        """The route of ("amp", "QueryMetrics"): 404 for a workspace that does not exist, else the answer."""
        from moto.amp.models import amp_backends

        found = QUERY_PATH.match(req.path)
        assert found is not None
        backend = amp_backends[self.ctx.account_id][req.region]
        if found.group(1) not in backend.workspaces:
            raise AwsError("ResourceNotFoundException", f"Workspace {found.group(1)} not found", 404,
                           resourceId=found.group(1), resourceType="Workspace")
        return handle(req, self.sims, self.ctx.clock.wall())


def install(twin: Any, sim_for: Callable[[str], ClusterSim | None]) -> WorkspaceQueries:
    """Serve every AMP workspace's query API on the twin's AWS port, fed by the simulated DCGM series."""
    queries = WorkspaceQueries(twin.aws.ctx, sim_for)
    twin.bus.subscribe("eks.addon.active", queries.on_addon_active)
    twin.bus.subscribe("eks.addon.deleted", queries.on_addon_deleted)
    twin.bus.subscribe("twin.reset", queries.on_reset)
    twin.aws.ctx.route("amp", "QueryMetrics")(queries)
    return queries
