"""Persisted alerts: one row per (rule, cluster, subject) episode, opened and resolved by the alert evaluator."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String, Text, func, select
from sqlalchemy.orm import Mapped, mapped_column

from instantstart.store.db import Database
from instantstart.store.models import Base, UTCDateTime

OPEN, RESOLVED = "open", "resolved"


class AlertRow(Base):
    """One alert episode: opened when its rule's condition held, resolved when it stopped; its deliveries."""

    __tablename__ = "alerts"
    __table_args__ = (
        Index("ix_alerts_state", "state", "cluster_tag"),
        Index("ix_alerts_key", "rule", "cluster_tag", "subject"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    rule: Mapped[str] = mapped_column(String(60), nullable=False)
    cluster_tag: Mapped[str] = mapped_column(String(100), nullable=False)
    subject: Mapped[str] = mapped_column(String(300), nullable=False)
    state: Mapped[str] = mapped_column(String(20), nullable=False, default=OPEN)
    message: Mapped[str] = mapped_column(Text, nullable=False, default="")
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # [{channel, event (open|resolve), ok, attempts, at, error}], appended after each delivery.
    deliveries: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False, default=list)


def open_alerts(db: Database) -> list[AlertRow]:
    """Every open alert (detached)."""
    with db.read_session() as session:
        rows = list(session.scalars(select(AlertRow).where(AlertRow.state == OPEN)).all())
        for row in rows:
            session.expunge(row)
        return rows


def open_counts(db: Database) -> dict[str, int]:
    """Open alerts per cluster tag (clusters without one are absent)."""
    with db.read_session() as session:
        rows = session.execute(
            select(AlertRow.cluster_tag, func.count()).where(AlertRow.state == OPEN).group_by(AlertRow.cluster_tag)
        ).all()
        return {str(tag): int(count) for tag, count in rows}


def query(db: Database, *, state: str | None = None, cluster_tag: str | None = None, rule: str | None = None,
          limit: int = 100) -> list[AlertRow]:
    """Alerts newest first, filtered; at most `limit` (detached)."""
    conditions: list[Any] = []
    if state:
        conditions.append(AlertRow.state == state)
    if cluster_tag:
        conditions.append(AlertRow.cluster_tag == cluster_tag)
    if rule:
        conditions.append(AlertRow.rule == rule)
    with db.read_session() as session:
        rows = list(session.scalars(select(AlertRow).where(*conditions).order_by(AlertRow.id.desc())
                                    .limit(limit)).all())
        for row in rows:
            session.expunge(row)
        return rows


def apply(db: Database, opened: list[tuple[str, str, str, str]], resolved: list[int], now: datetime) -> tuple[
        list[AlertRow], list[AlertRow]]:
    """Open alerts for (rule, cluster, subject, message) that have no open row yet and resolve the rows `resolved`
    that are still open (guarded: a concurrent evaluator's change is not repeated). Returns what changed."""
    new: list[AlertRow] = []
    closed: list[AlertRow] = []
    with db.session() as session:
        for rule, tag, subject, message in opened:
            exists = session.scalar(select(AlertRow.id).where(
                AlertRow.rule == rule, AlertRow.cluster_tag == tag, AlertRow.subject == subject,
                AlertRow.state == OPEN))
            if exists is None:
                row = AlertRow(rule=rule, cluster_tag=tag, subject=subject, state=OPEN, message=message[:2000],
                               opened_at=now, deliveries=[])
                session.add(row)
                new.append(row)
        for alert_id in resolved:
            found = session.get(AlertRow, alert_id)
            if found is not None and found.state == OPEN:
                found.state, found.resolved_at = RESOLVED, now
                closed.append(found)
        session.flush()
        for row in new + closed:
            session.expunge(row)
    return new, closed


def add_deliveries(db: Database, alert_id: int, deliveries: list[dict[str, Any]]) -> None:
    """Append delivery records to an alert."""
    with db.session() as session:
        row = session.get(AlertRow, alert_id)
        if row is not None:
            row.deliveries = [*(row.deliveries or []), *deliveries]
