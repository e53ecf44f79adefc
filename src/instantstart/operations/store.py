"""Database access for operations: submit with idempotency and target locks, leases, stage updates."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from instantstart.errors import Cancelled, Conflict, IdempotencyKeyReused, NotFound
from instantstart.operations.kinds import KindRegistry, OperationKind
from instantstart.operations.models import ACTIVE, TERMINAL, OperationView, OpStatus, StageView
from instantstart.operations.secrets import refuse_secrets, remember_operation_secrets, scrub_secrets
from instantstart.operations.stage_record import StageRecord
from instantstart.store.db import Database
from instantstart.store.models import OperationRow, StateRow, utcnow


def new_operation_id() -> str:
    """A fresh, unguessable operation id."""
    return "op-" + secrets.token_hex(10)


def _key_slot(tool: str, key: str) -> str:
    return "idem:" + hashlib.sha256(f"{tool}\n{key}".encode()).hexdigest()[:40]


def to_view(row: OperationRow) -> OperationView:
    """The wire view of a stored operation."""
    end = row.finished_at or utcnow()
    start = row.started_at or row.created_at
    current = next((s["name"] for s in row.stages if s["status"] not in TERMINAL), None)
    return OperationView.model_validate(
        {
            "operationId": row.id,
            "kind": row.kind,
            "target": row.target,
            "status": row.status,
            "params": row.params,
            "stages": [StageView.model_validate(s) for s in row.stages],
            "currentStage": current,
            "error": row.error,
            "result": row.result,
            "cancelRequested": row.cancel_requested,
            "createdAt": row.created_at,
            "updatedAt": row.updated_at,
            "startedAt": row.started_at,
            "finishedAt": row.finished_at,
            "elapsedSeconds": round(max((end - start).total_seconds(), 0.0), 3),
        }
    )


class OperationStore:
    """All reads and writes of operation rows (synchronous; callers run it in a worker thread)."""

    def __init__(self, db: Database, kinds: KindRegistry | None = None) -> None:
        self.db = db
        self.kinds = kinds

    def _mirror(self, session: Session, kind: str, target: str | None, stages: list[dict[str, Any]]) -> None:
        """Hand a change of stages to the kind's mirror, inside the transaction that makes it."""
        mirror = self.kinds.mirror_of(kind) if self.kinds is not None else None
        if mirror is not None:
            mirror(session, target, stages)

    # -- submission --------------------------------------------------------------------------
    def submit(
        self, kind: OperationKind, params: dict[str, Any], target: str | None, idempotency_key: str | None
    ) -> tuple[OperationView, bool]:
        """Record a new operation, or return the existing one for the same (kind, idempotency key).

        Returns (operation, created). Raises Conflict when another active operation holds `target`.
        """
        refuse_secrets("params", params)
        if idempotency_key is not None:
            existing = self._by_key(kind.name, idempotency_key)
            if existing is not None:
                return existing, False
        now = utcnow()
        row = OperationRow(
            id=new_operation_id(),
            kind=kind.name,
            target=target,
            params=params,
            idempotency_key=idempotency_key,
            status=OpStatus.PENDING.value,
            stages=[StageRecord(s.name).to_dict() for s in kind.stages],
            error=None,
            result=None,
            active_target=target,
            cancel_requested=False,
            created_at=now,
            updated_at=now,
        )
        try:
            with self.db.session() as session:
                session.add(row)
            remember_operation_secrets(row.id)
            return to_view(row), True
        except IntegrityError:
            pass
        if idempotency_key is not None:
            existing = self._by_key(kind.name, idempotency_key)
            if existing is not None:
                return existing, False
        raise self._target_conflict(target)

    def bind_idempotency_key(self, tool: str, key: str, digest: str) -> bool:
        """Bind an idempotency key of `tool` to the digest of its arguments. Returns True when this call
        made the binding; raises IdempotencyKeyReused when the key is bound to different arguments."""
        slot = _key_slot(tool, key)
        for _ in range(2):
            with self.db.session() as session:
                row = session.get(StateRow, slot)
                if row is not None:
                    if row.value.get("digest") != digest:
                        raise IdempotencyKeyReused(
                            f"The idempotency key {key!r} was used for {tool} with different arguments.",
                            details={"fields": [{"field": "clientToken", "message": "reused with other arguments"}]},
                        )
                    return False
            try:
                with self.db.session() as session:
                    session.add(StateRow(key=slot, value={"tool": tool, "digest": digest}, updated_at=utcnow()))
                return True
            except IntegrityError:
                continue  # a concurrent call bound it first: compare with its digest
        return False

    def unbind_idempotency_key(self, tool: str, key: str) -> None:
        """Forget a binding whose call recorded nothing (it failed before submitting)."""
        with self.db.session() as session:
            row = session.get(StateRow, _key_slot(tool, key))
            if row is not None:
                session.delete(row)

    def find_by_key(self, kind: str, key: str) -> OperationView | None:
        """The operation of `kind` recorded under an idempotency key, if any."""
        return self._by_key(kind, key)

    def _by_key(self, kind: str, key: str) -> OperationView | None:
        with self.db.session() as session:
            row = session.scalar(
                select(OperationRow).where(OperationRow.kind == kind, OperationRow.idempotency_key == key)
            )
            return to_view(row) if row else None

    def _target_conflict(self, target: str | None) -> Conflict:
        with self.db.session() as session:
            blocking = session.scalar(select(OperationRow).where(OperationRow.active_target == target))
        if blocking is None:
            return Conflict(f"Could not record the operation on {target!r}; please retry.")
        return Conflict(
            f"{target!r} is busy: operation {blocking.id} ({blocking.kind}) is {blocking.status}.",
            details={"blockingOperationId": blocking.id, "blockingKind": blocking.kind},
        )

    # -- reads -------------------------------------------------------------------------------
    def get(self, operation_id: str) -> OperationView:
        """One operation; NotFound if absent."""
        with self.db.read_session() as session:
            row = session.get(OperationRow, operation_id)
            if row is None:
                raise NotFound(f"Operation {operation_id!r} not found.", hint="List operations with operation_list.")
            return to_view(row)

    def list_operations(
        self,
        *,
        status: str | None = None,
        target: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[OperationView], int]:
        """Operations newest first, filtered, with the total count of matches."""
        conditions = []
        if status:
            conditions.append(OperationRow.status == status)
        if target:
            conditions.append(OperationRow.target == target)
        if kind:
            conditions.append(OperationRow.kind == kind)
        with self.db.read_session() as session:
            total = session.scalar(select(func.count()).select_from(OperationRow).where(*conditions)) or 0
            rows = session.scalars(
                select(OperationRow)
                .where(*conditions)
                .order_by(OperationRow.created_at.desc(), OperationRow.id)
                .limit(limit)
                .offset(offset)
            ).all()
            return [to_view(r) for r in rows], total

    def runnable_ids(self, exclude: set[str], limit: int) -> list[str]:
        """Active operations whose lease is free or expired, oldest first."""
        now = utcnow()
        with self.db.session() as session:
            ids = session.scalars(
                select(OperationRow.id)
                .where(
                    OperationRow.status.in_(ACTIVE),
                    or_(OperationRow.lease_expires_at.is_(None), OperationRow.lease_expires_at < now),
                )
                .order_by(OperationRow.created_at)
                .limit(limit + len(exclude))
            ).all()
        return [i for i in ids if i not in exclude][:limit]

    # -- leases ------------------------------------------------------------------------------
    def claim(self, operation_id: str, owner: str, ttl: float) -> str | None:
        """Take the lease of an active operation if it is free or expired; return the lease token."""
        now = utcnow()
        token = secrets.token_hex(16)
        with self.db.session() as session:
            result = session.execute(
                update(OperationRow)
                .where(
                    OperationRow.id == operation_id,
                    OperationRow.status.in_(ACTIVE),
                    or_(OperationRow.lease_expires_at.is_(None), OperationRow.lease_expires_at < now),
                )
                .values(lease_owner=owner, lease_token=token, lease_expires_at=now + timedelta(seconds=ttl))
            )
            return token if result.rowcount == 1 else None  # type: ignore[attr-defined]

    def renew(self, operation_id: str, token: str, ttl: float) -> bool:
        """Extend a lease we hold; False if it was lost."""
        with self.db.session() as session:
            result = session.execute(
                update(OperationRow)
                .where(OperationRow.id == operation_id, OperationRow.lease_token == token)
                .values(lease_expires_at=utcnow() + timedelta(seconds=ttl))
            )
            return bool(result.rowcount == 1)  # type: ignore[attr-defined]

    def load_leased(self, operation_id: str, token: str) -> OperationRow | None:
        """The row, if we still hold its lease (detached copy)."""
        with self.db.session() as session:
            row = session.scalar(
                select(OperationRow).where(OperationRow.id == operation_id, OperationRow.lease_token == token)
            )
            if row is not None:
                session.expunge(row)
            return row

    def save_leased(self, operation_id: str, token: str, **values: Any) -> bool:
        """Write fields of an operation we hold the lease of; False if the lease was lost."""
        for column in ("result", "stages", "error"):
            if column in values:
                values[column] = scrub_secrets(values[column], operation_id)
        values["updated_at"] = utcnow()
        with self.db.session() as session:
            result = session.execute(
                update(OperationRow)
                .where(OperationRow.id == operation_id, OperationRow.lease_token == token)
                .values(**values)
            )
            saved = bool(result.rowcount == 1)  # type: ignore[attr-defined]
            if saved and "stages" in values:
                kind, target = session.execute(
                    select(OperationRow.kind, OperationRow.target).where(OperationRow.id == operation_id)
                ).one()
                self._mirror(session, kind, target, values["stages"])
            return saved

    def release(self, operation_id: str, token: str) -> None:
        """Give a lease back (the operation stays as it is)."""
        self.save_leased(operation_id, token, lease_owner=None, lease_token=None, lease_expires_at=None)

    def cancel_requested(self, operation_id: str) -> bool:
        """Whether a caller asked to cancel."""
        with self.db.session() as session:
            return bool(session.scalar(select(OperationRow.cancel_requested).where(OperationRow.id == operation_id)))

    # -- caller actions ----------------------------------------------------------------------
    def request_cancel(self, operation_id: str) -> OperationView:
        """Cancel a PENDING operation at once, or ask the runner to stop a RUNNING one."""
        now = utcnow()
        with self.db.session() as session:
            row = session.get(OperationRow, operation_id)
            if row is None:
                raise NotFound(f"Operation {operation_id!r} not found.")
            if row.status in TERMINAL:
                raise Conflict(
                    f"Operation {operation_id} is already {row.status}; nothing to cancel.",
                    hint="Use operation_retry to run a failed or cancelled operation again.",
                )
            row.cancel_requested = True
            row.updated_at = now
            unleased = row.lease_expires_at is None or row.lease_expires_at < now
            if row.status == OpStatus.PENDING.value and unleased:
                row.status = OpStatus.CANCELLED.value
                row.active_target = None
                row.finished_at = now
                row.stages = [
                    {**s, "status": OpStatus.CANCELLED.value} if s["status"] not in TERMINAL else s for s in row.stages
                ]
                row.error = Cancelled("Cancelled before it started.").to_dict()
                self._mirror(session, row.kind, row.target, row.stages)
            return to_view(row)

    def reset_for_retry(self, operation_id: str) -> OperationView:
        """Make a FAILED or CANCELLED operation runnable again from its first unfinished stage."""
        now = utcnow()
        try:
            with self.db.session() as session:
                row = session.get(OperationRow, operation_id)
                if row is None:
                    raise NotFound(f"Operation {operation_id!r} not found.")
                if row.status not in (OpStatus.FAILED.value, OpStatus.CANCELLED.value):
                    raise Conflict(
                        f"Operation {operation_id} is {row.status}; only FAILED or CANCELLED operations retry.",
                        hint="Poll it with operation_get until it ends.",
                    )
                row.stages = [
                    {**s, "status": OpStatus.PENDING.value, "attempts": 0, "message": "", "finishedAt": None}
                    if s["status"] != OpStatus.SUCCEEDED.value
                    else s
                    for s in row.stages
                ]
                row.status = OpStatus.PENDING.value
                row.error = None
                row.cancel_requested = False
                row.finished_at = None
                row.active_target = row.target
                row.updated_at = now
                row.lease_owner = row.lease_token = None
                row.lease_expires_at = None
                self._mirror(session, row.kind, row.target, row.stages)
                view = to_view(row)
            return view
        except IntegrityError:
            with self.db.session() as session:
                row = session.get(OperationRow, operation_id)
                target = row.target if row else None
            raise self._target_conflict(target) from None

    def stale_count(self) -> dict[str, int]:
        """Operations by status (for metrics)."""
        with self.db.session() as session:
            rows = session.execute(select(OperationRow.status, func.count()).group_by(OperationRow.status)).all()
        return {status: int(count) for status, count in rows}


def finished_values(status: OpStatus, error: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """Column values that end an operation and free its target and lease."""
    return {
        "status": status.value,
        "error": error,
        "finished_at": now,
        "active_target": None,
        "lease_owner": None,
        "lease_token": None,
        "lease_expires_at": None,
    }


__all__ = ["OperationStore", "finished_values", "new_operation_id", "to_view"]
