"""Small named values of the control plane (the `state` table): read one, write one."""

from __future__ import annotations

from typing import Any

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
