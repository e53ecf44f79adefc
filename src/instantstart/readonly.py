"""The read-only guard: while a read-only operation runs, the store, the timeline and the feeds refuse to write."""

from __future__ import annotations

import re
from contextvars import ContextVar

# The read-only operation running in this context (set by the one invocation path, catalog.invoke), else None.
read_only_call: ContextVar[str | None] = ContextVar("read_only_call", default=None)
WRITE_SQL = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER)\b", re.IGNORECASE)


class ReadWrote(RuntimeError):
    """A read-only operation tried to change something (a bug in that operation, never the caller's fault)."""


def refuse_write(what: str) -> None:
    """Raise ReadWrote when a read-only operation runs in this context: a read changes nothing."""
    name = read_only_call.get()
    if name is not None:
        raise ReadWrote(f"the read-only operation {name} tried to {what}; a read changes nothing (declare it"
                        " side-effecting or mutating, or move the write out of the read)")


def refuse_write_sql(statement: str) -> None:
    """`refuse_write` for a SQL statement that changes rows or schema."""
    if read_only_call.get() is not None and WRITE_SQL.match(statement):
        refuse_write(f"write the database ({statement.split(None, 3)[:3]})")
