"""Small named values of the control plane (the `state` table): read one, write one, claim one."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from instantstart.store.db import Database
from instantstart.store.models import StateRow, utcnow


def read_state(db: Database, key: str) -> Any:
    """The value stored under `key`, or None when there is none (a read session: no write lock)."""
    with db.read_session() as session:
        row = session.get(StateRow, key)
        return row.value if row is not None else None


def write_state(db: Database, key: str, value: Any) -> None:
    """Store `value` under `key`, replacing what was there."""
    with db.session() as session:
        row = session.get(StateRow, key)
        if row is None:
            session.add(StateRow(key=key, value=value, updated_at=utcnow()))
        else:
            row.value, row.updated_at = value, utcnow()


def claim_state(db: Database, key: str, value: Any) -> Any:
    """Store `value` under `key` unless a value is there already; the value stored (the first writer's: two
    callers racing to claim `key` both get the winner's)."""
    try:
        with db.session() as session:
            row = session.get(StateRow, key)
            if row is not None:
                return row.value
            session.add(StateRow(key=key, value=value, updated_at=utcnow()))
        return value
    except IntegrityError:  # another writer inserted `key` between our read and our commit
        return read_state(db, key)
