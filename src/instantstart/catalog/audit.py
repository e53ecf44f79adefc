"""Writing the audit trail: who (user, role, token name, face, address) called which operation, and the outcome.

Only the operation name, the target cluster tag, the outcome, the error code and the operation id are kept:
never arguments, so no secret or request body can reach it. Entries older than `audit_retention_days` go.
"""

from __future__ import annotations

import time
from typing import Any

from anyio import to_thread

from instantstart.catalog.registry import OperationSpec
from instantstart.context import CallContext, Slot
from instantstart.principal import Principal
from instantstart.store.access import AuditRow, prune_audit, record_audit

PRUNE_EVERY_SECONDS = 3600.0
LAST_PRUNE: Slot[list[float]] = Slot("audit pruned at")  # per application: [monotonic seconds]


def _target(raw: Any) -> str:
    """The cluster tag the caller named, if any (a tag is no secret); clipped to the column."""
    tag = raw.get("clusterTag", raw.get("cluster_tag")) if isinstance(raw, dict) else None
    return tag[:63] if isinstance(tag, str) else ""


async def audit(
    ctx: CallContext,
    principal: Principal,
    spec: OperationSpec,
    raw: Any,
    outcome: str,
    error_code: str = "",
    operation_id: str = "",
) -> None:
    """Record one call (outcome ok, denied or error) in the audit trail, pruning old entries now and then."""
    row = AuditRow(
        user=principal.user,
        role=principal.role,
        token_name=principal.token_name,
        face=principal.face,
        source=principal.source[:64],
        operation=spec.name,
        cluster_tag=_target(raw),
        outcome=outcome,
        error_code=error_code,
        operation_id=operation_id[:40],
    )
    db = ctx.app.db
    await to_thread.run_sync(record_audit, db, row)
    now = time.monotonic()
    pruned = ctx.app.owned.get(LAST_PRUNE, lambda: [-PRUNE_EVERY_SECONDS])
    if now - pruned[0] >= PRUNE_EVERY_SECONDS:
        pruned[0] = now
        await to_thread.run_sync(prune_audit, db, ctx.app.settings.audit_retention_days)
