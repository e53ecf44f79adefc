"""Operation tools: read, list, retry and cancel persisted operations."""

from __future__ import annotations

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.operations.models import OperationRef, OperationView, OpStatus


class OperationIdRequest(WireModel):
    """Names one operation."""

    operation_id: str = Field(
        min_length=4, max_length=40, pattern=r"^op-[0-9a-f]+$", description="The id a mutating call returned (op-…)."
    )


class OperationListRequest(WireModel):
    """Filters and paging for operation_list."""

    status: OpStatus | None = None
    target: str | None = Field(default=None, max_length=200)
    kind: str | None = Field(default=None, max_length=100)
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0, le=1_000_000_000)


class OperationListResult(WireModel):
    """A page of operations, newest first."""

    operations: list[OperationView]
    total: int
    limit: int
    offset: int
    next_offset: int | None


@operation("operation_get", method="GET", path="/operations/{operationId}", example={"operationId": "op-0000"})
async def operation_get(ctx: CallContext, req: OperationIdRequest) -> OperationView:
    """One operation: status, every stage (status, attempts, times, message, outputs), error with
    code and hint, result. Poll this (with wait_seconds between calls) until status is SUCCEEDED,
    FAILED or CANCELLED."""
    return await to_thread.run_sync(ctx.app.runner.store.get, req.operation_id)


@operation("operation_list", method="GET", path="/operations", example={"limit": 5})
async def operation_list(ctx: CallContext, req: OperationListRequest) -> OperationListResult:
    """Operations newest first, filtered by status, target or kind, paginated with limit/offset."""
    status = req.status.value if req.status else None
    items, total = await to_thread.run_sync(
        lambda: ctx.app.runner.store.list_operations(
            status=status, target=req.target, kind=req.kind, limit=req.limit, offset=req.offset
        )
    )
    more = req.offset + len(items) < total
    return OperationListResult(
        operations=items,
        total=total,
        limit=req.limit,
        offset=req.offset,
        next_offset=req.offset + len(items) if more else None,
    )


@operation(
    "operation_retry",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/operations/{operationId}/retry",
    completion="operation_get",
    example={"operationId": "op-0000"},
)
async def operation_retry(ctx: CallContext, req: OperationIdRequest) -> OperationRef:
    """Run a FAILED or CANCELLED operation again from the stage that did not finish. Stages that
    succeeded are never rerun. Refused while the operation is still active."""
    view = await to_thread.run_sync(ctx.app.runner.store.reset_for_retry, req.operation_id)
    ctx.app.runner.wake()
    return OperationRef(
        operation_id=view.operation_id, status=view.status, status_tool="operation_get", poll_after_seconds=5
    )


@operation(
    "operation_cancel",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/operations/{operationId}/cancel",
    completion="operation_get",
    example={"operationId": "op-0000"},
)
async def operation_cancel(ctx: CallContext, req: OperationIdRequest) -> OperationRef:
    """Cancel an operation. A PENDING one is cancelled at once; a RUNNING one stops its current
    stage and ends CANCELLED (what earlier stages created stays). operation_retry resumes it."""
    view = await to_thread.run_sync(ctx.app.runner.store.request_cancel, req.operation_id)
    ctx.app.runner.wake()
    return OperationRef(
        operation_id=view.operation_id, status=view.status, status_tool="operation_get", poll_after_seconds=2
    )
