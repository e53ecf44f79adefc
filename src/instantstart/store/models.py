"""SQLAlchemy models: operations, clusters, the resource ledger, and small key/value state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Index, Integer, String, UniqueConstraint
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Stores aware datetimes as UTC and always reads them back aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of every table."""


class OperationRow(Base):
    """A persisted operation: intent recorded before any external call, then driven by a worker."""

    __tablename__ = "operations"
    __table_args__ = (
        UniqueConstraint("kind", "idempotency_key", name="uq_operations_kind_idempotency_key"),
        Index("ix_operations_status", "status"),
        Index("ix_operations_target", "target"),
        Index("ix_operations_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(100))
    target: Mapped[str | None] = mapped_column(String(200))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    stages: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Set to the target while the operation is PENDING or RUNNING; the unique index makes
    # "one active mutating operation per target" hold across processes and databases.
    active_target: Mapped[str | None] = mapped_column(String(200), unique=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    lease_owner: Mapped[str | None] = mapped_column(String(120))
    lease_token: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class ClusterRow(Base):
    """A managed (created or imported) cluster, named by its cluster tag."""

    __tablename__ = "clusters"

    tag: Mapped[str] = mapped_column(String(63), primary_key=True)
    region: Mapped[str] = mapped_column(String(32))
    eks_cluster_name: Mapped[str] = mapped_column(String(100))
    hyperpod_cluster_name: Mapped[str | None] = mapped_column(String(63))
    imported: Mapped[bool] = mapped_column(Boolean, default=False)
    stages: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ResourceRow(Base):
    """The resource ledger: every AWS resource the control plane created, so deletion can be planned."""

    __tablename__ = "resources"
    __table_args__ = (
        UniqueConstraint("resource_type", "resource_id", "region", name="uq_resources_type_id_region"),
        Index("ix_resources_cluster_tag", "cluster_tag"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cluster_tag: Mapped[str] = mapped_column(String(63))
    operation_id: Mapped[str | None] = mapped_column(String(40))
    resource_type: Mapped[str] = mapped_column(String(80))
    resource_id: Mapped[str] = mapped_column(String(400))
    region: Mapped[str] = mapped_column(String(32))
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class StateRow(Base):
    """Small named values of the control plane itself (e.g. the active cluster)."""

    __tablename__ = "state"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
