"""One container's log read, bounded (64 KiB, 2000-character lines): pod_logs and a training job's logs read it."""

from __future__ import annotations

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.context import AppContext
from instantstart.kube import core_kinds
from instantstart.kube.calls import kube_api, kube_call
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

LIMIT_BYTES = 64 * 1024
LINE_CHARS = 2000


class PodLogsRequest(WireModel):
    """Which pod and container, and how much of its log."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Default: see cluster_list_all (active).")
    namespace: str = Field(default="default", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    pod_name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
    container: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    tail_lines: int = Field(default=100, ge=1, le=1000, description="Last N lines (1-1000).")
    since_seconds: int | None = Field(default=None, ge=1, le=86400, description="Only lines newer than this.")
    previous: bool = Field(default=False, description="The previous (crashed) container instance's log.")


def read_log(app: AppContext, row: ClusterRow, req: PodLogsRequest) -> tuple[list[str], bool]:
    """The bounded log tail (blocking)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    kwargs: dict[str, object] = {"tail_lines": req.tail_lines, "limit_bytes": LIMIT_BYTES, "previous": req.previous}
    if req.container:
        kwargs["container"] = req.container
    if req.since_seconds:
        kwargs["since_seconds"] = req.since_seconds
    text = kube_call(
        f"read the log of {req.namespace}/{req.pod_name}",
        core_kinds.read_pod_log,
        api,
        req.pod_name,
        req.namespace,
        **kwargs,
    )
    raw = str(text or "")
    lines = raw.splitlines()
    cut = len(raw.encode()) >= LIMIT_BYTES
    shortened = [line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…" for line in lines]
    return shortened[-req.tail_lines :], cut or shortened != lines
