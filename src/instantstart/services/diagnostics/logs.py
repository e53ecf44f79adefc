"""pod_logs: a bounded tail of one container's log."""

from __future__ import annotations

from anyio import to_thread

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.operations.waiting import blocking
from instantstart.services.base.pod_logs import PodLogsRequest, read_log
from instantstart.services.base.registry import get_cluster, resolve_tag


class PodLogsResult(WireModel):
    """The tail, line by line; truncated when the 64 KiB bound or the line bound cut it."""

    cluster_tag: str
    namespace: str
    pod_name: str
    container: str | None
    lines: list[str]
    truncated: bool


@operation(
    "pod_logs", method="GET", path="/diagnostics/pod-logs", example={"podName": "missing-pod"}, cli=("pod", "logs")
)
async def pod_logs(ctx: CallContext, req: PodLogsRequest) -> PodLogsResult:
    """Read-only, bounded: the last `tailLines` (≤1000) lines, at most 64 KiB, lines cut to 2000 characters,
    of one container of a pod (namespace default; `container` when the pod has several; `previous` for the
    crashed instance). An unknown pod is NOT_FOUND; cluster_list_workloads lists the pods."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    lines, truncated = await blocking(read_log, ctx.app, row, req)
    return PodLogsResult(
        cluster_tag=tag,
        namespace=req.namespace,
        pod_name=req.pod_name,
        container=req.container,
        lines=lines,
        truncated=truncated,
    )
