"""The installation id: made once per database, tagged on what this control plane creates, checked before
adopting or deleting anything found by tag alone."""

from __future__ import annotations

import secrets

from sqlalchemy.exc import IntegrityError

from instantstart.store.db import Database
from instantstart.store.models import StateRow, utcnow

INSTALLATION_KEY = "installation-id"


def installation_id(db: Database) -> str:
    """This installation's id: made once per database, then always the same."""
    with db.session() as session:
        row = session.get(StateRow, INSTALLATION_KEY)
        if row is not None and row.value:
            return str(row.value)
    try:
        with db.session() as session:
            session.add(StateRow(key=INSTALLATION_KEY, value=f"is-{secrets.token_hex(8)}", updated_at=utcnow()))
    except IntegrityError:
        pass  # another worker made it first; read theirs
    with db.session() as session:
        row = session.get(StateRow, INSTALLATION_KEY)
        assert row is not None
        return str(row.value)
