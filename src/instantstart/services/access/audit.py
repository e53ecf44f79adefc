"""Reading the audit trail (admin): who called what, through which face and token, and the outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from anyio import to_thread
from pydantic import Field
from sqlalchemy import select

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.services.access.users import USER_NAME
from instantstart.store.access import AuditRow
from instantstart.store.db import Database


class AuditListRequest(WireModel):
    """Filters of the audit trail."""

    user: str | None = Field(default=None, pattern=USER_NAME, description="Only this user's calls.")
    operation: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{1,63}$", description="Only this operation.")
    outcome: Literal["ok", "denied", "error"] | None = Field(default=None, description="Only this outcome.")
    limit: int = Field(default=100, ge=1, le=1000, description="At most this many entries, newest first (1-1000).")


class AuditEntry(WireModel):
    """One recorded call: no arguments are kept, so no secret can be in it."""

    at: datetime
    user: str
    role: str
    token_name: str
    face: str
    source: str
    operation: str
    cluster_tag: str
    outcome: str
    error_code: str
    operation_id: str


class AuditList(WireModel):
    """Audit entries, newest first."""

    entries: list[AuditEntry]


def read_audit(db: Database, req: AuditListRequest) -> list[AuditEntry]:
    """The newest entries matching the filters."""
    query = select(AuditRow).order_by(AuditRow.at.desc(), AuditRow.id.desc()).limit(req.limit)
    if req.user:
        query = query.where(AuditRow.user == req.user)
    if req.operation:
        query = query.where(AuditRow.operation == req.operation)
    if req.outcome:
        query = query.where(AuditRow.outcome == req.outcome)
    with db.read_session() as session:
        return [
            AuditEntry(at=r.at, user=r.user, role=r.role, token_name=r.token_name, face=r.face, source=r.source,
                       operation=r.operation, cluster_tag=r.cluster_tag, outcome=r.outcome, error_code=r.error_code,
                       operation_id=r.operation_id)
            for r in session.scalars(query)
        ]


@operation("audit_list", method="GET", path="/audit", example={"limit": 5}, cli=("audit", "list"))
async def audit_list(ctx: CallContext, req: AuditListRequest) -> AuditList:
    """List the audit trail (admin only), newest first, filterable by user, operation and outcome: every call
    that changed or reached something and every refused call, with the user, their role, the token's name,
    the face (rest, mcp, cli, ui), the source address, the cluster tag, the outcome and the error code. Kept
    for audit_retention_days; request arguments are never recorded."""
    return AuditList(entries=await to_thread.run_sync(read_audit, ctx.app.db, req))
