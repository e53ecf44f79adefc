"""Users, their API tokens (only a SHA-256 digest is stored) and the audit trail of who called what."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, delete, select
from sqlalchemy.orm import Mapped, mapped_column

from instantstart.store.db import Database
from instantstart.store.models import Base, UTCDateTime, utcnow


class UserRow(Base):
    """A person (or robot) who may call the control plane, with one role."""

    __tablename__ = "users"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(64), default="")


class TokenRow(Base):
    """A named API token of a user; `digest` is the SHA-256 of the token, which itself is never stored."""

    __tablename__ = "api_tokens"
    __table_args__ = (Index("ix_api_tokens_user", "user"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user: Mapped[str] = mapped_column(String(64), ForeignKey("users.name", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class AuditRow(Base):
    """One call that changed or reached something, or that was refused: who, how, what, and the outcome."""

    __tablename__ = "audit"
    __table_args__ = (Index("ix_audit_at", "at"), Index("ix_audit_user_at", "user", "at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    user: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    token_name: Mapped[str] = mapped_column(String(64))
    face: Mapped[str] = mapped_column(String(8))
    source: Mapped[str] = mapped_column(String(64))
    operation: Mapped[str] = mapped_column(String(64))
    cluster_tag: Mapped[str] = mapped_column(String(63), default="")
    outcome: Mapped[str] = mapped_column(String(16))  # ok, denied, error
    error_code: Mapped[str] = mapped_column(String(40), default="")
    operation_id: Mapped[str] = mapped_column(String(40), default="")


def digest(token: str) -> str:
    """The stored form of a token: SHA-256 hex (tokens are 32 random bytes, so no salt or stretching is needed)."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh token: 32 random bytes, URL-safe, with a prefix that secret scanners recognise."""
    return "isk_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class TokenOwner:
    """Who a presented token belongs to."""

    token_id: str
    token_name: str
    user: str
    role: str


def _owner(db: Database, where: Any, now: datetime | None) -> tuple[str, TokenOwner] | None:
    """(digest, owner) of the token matching `where` while it is live (not revoked, not expired)."""
    moment = now or utcnow()
    with db.read_session() as session:
        row = session.execute(
            select(TokenRow, UserRow).join(UserRow, UserRow.name == TokenRow.user).where(where)
        ).first()
        if row is None:
            return None
        token_row, user_row = row
        if token_row.revoked_at is not None or (token_row.expires_at is not None and token_row.expires_at <= moment):
            return None
        return token_row.digest, TokenOwner(token_row.id, token_row.name, user_row.name, user_row.role)


def resolve(db: Database, token: str, now: datetime | None = None) -> TokenOwner | None:
    """The live (not revoked, not expired) token equal to `token` and its user; None otherwise."""
    wanted = digest(token)
    found = _owner(db, TokenRow.digest == wanted, now)
    # The index found it by digest; compare again in constant time all the same.
    return found[1] if found is not None and hmac.compare_digest(found[0], wanted) else None


def live_token(db: Database, token_id: str, now: datetime | None = None) -> TokenOwner | None:
    """As `resolve`, by token id (a browser session re-checks its token on every request)."""
    found = _owner(db, TokenRow.id == token_id, now)
    return found[1] if found is not None else None


def ensure_user(db: Database, name: str, role: str) -> None:
    """Create the user `name` with `role` unless it exists (the bootstrap admin at every start)."""
    with db.session() as session:
        if session.get(UserRow, name) is None:
            session.add(UserRow(name=name, role=role, created_by="bootstrap"))


def record_audit(db: Database, row: AuditRow) -> None:
    """Append one audit entry."""
    with db.session() as session:
        session.add(row)


def actors(db: Database, operation_ids: list[str]) -> dict[str, AuditRow]:
    """The audit entry of the call that started each of these operations (outcome ok), by operation id."""
    if not operation_ids:
        return {}
    with db.read_session() as session:
        rows = session.scalars(
            select(AuditRow).where(AuditRow.operation_id.in_(operation_ids), AuditRow.outcome == "ok")
        ).all()
        for row in rows:
            session.expunge(row)
        return {row.operation_id: row for row in rows}


def prune_audit(db: Database, retention_days: float, now: datetime | None = None) -> int:
    """Delete audit entries older than the retention; returns how many went."""
    cutoff = (now or utcnow()) - timedelta(days=retention_days)
    with db.session() as session:
        return int(session.execute(delete(AuditRow).where(AuditRow.at < cutoff)).rowcount or 0)  # type: ignore[attr-defined]
