"""Where a cluster's creation stage stands: the latest operation running it, and the resource right now."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.operations.waiting import blocking
from instantstart.services.base.registry import get_cluster
from instantstart.services.base.target import cluster_target
from instantstart.store.models import utcnow


class StageStatus(WireModel):
    """Where a cluster's creation stage stands; never an ambiguous null."""

    cluster_tag: str
    stage: str
    state: str = Field(description="NOT_STARTED, IN_PROGRESS, SUCCEEDED, FAILED or CANCELLED")
    terminal: bool
    operation_id: str | None
    message: str
    elapsed_seconds: float
    error: dict[str, Any] | None
    resource_status: str | None = Field(description="What AWS reports for the resource right now.")
    details: dict[str, Any]


async def stage_status(
    ctx: CallContext, tag: str, stage_name: str, kinds: tuple[str, ...], resource: Any = None
) -> StageStatus:
    """The latest operation running `stage_name` for the cluster, plus a fresh (cached) look at the resource."""
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    ops = []
    for kind in kinds:
        found, _ = await blocking(ctx.app.runner.store.list_operations, target=cluster_target(tag), kind=kind, limit=1)
        ops.extend(found)
    ops.sort(key=lambda o: o.created_at, reverse=True)
    current = resource() if resource else None
    resource_status = await current if current is not None else None
    if not ops:
        state = (row.stages or {}).get(stage_name, "NOT_STARTED")
        return StageStatus(
            cluster_tag=tag,
            stage=stage_name,
            state=_state(state),
            terminal=state != "RUNNING",
            operation_id=None,
            message="no operation has run this stage",
            elapsed_seconds=0.0,
            error=None,
            resource_status=resource_status,
            details=row.details or {},
        )
    op = ops[0]
    stage = next((s for s in op.stages if s.name == stage_name), op.stages[0])
    state = _state(stage.status.value)
    started = stage.started_at or op.created_at
    ended = stage.finished_at or (op.finished_at if op.status.value in ("FAILED", "CANCELLED") else None)
    elapsed = ((ended or utcnow()) - started).total_seconds() if isinstance(started, datetime) else 0.0
    return StageStatus(
        cluster_tag=tag,
        stage=stage_name,
        state=state,
        terminal=state in ("SUCCEEDED", "FAILED", "CANCELLED"),
        operation_id=op.operation_id,
        message=stage.message or op.status.value,
        elapsed_seconds=round(elapsed, 1),
        error=op.error.model_dump(by_alias=True) if op.error and state != "SUCCEEDED" else None,
        resource_status=resource_status,
        details=row.details or {},
    )


def _state(status: str) -> str:
    return {"PENDING": "IN_PROGRESS", "RUNNING": "IN_PROGRESS"}.get(status, status)
