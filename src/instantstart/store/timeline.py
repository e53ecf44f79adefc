"""The persistent timeline: one row per happening on a cluster, node, job or endpoint, deduplicated by key."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Index, Integer, String, Text, UniqueConstraint, delete, or_, select
from sqlalchemy.orm import Mapped, mapped_column

from instantstart.store.db import Database
from instantstart.store.models import Base, UTCDateTime


class TimelineRow(Base):
    """A Kubernetes event, a HyperPod event, or an operation's stage transition, kept past the source's expiry."""

    __tablename__ = "timeline"
    __table_args__ = (
        UniqueConstraint("cluster_tag", "dedupe_key", name="uq_timeline_dedupe"),
        Index("ix_timeline_cluster_last", "cluster_tag", "last_at"),
        Index("ix_timeline_object", "cluster_tag", "object_kind", "object_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cluster_tag: Mapped[str] = mapped_column(String(100), nullable=False)
    dedupe_key: Mapped[str] = mapped_column(String(300), nullable=False)
    source: Mapped[str] = mapped_column(String(20), nullable=False)  # kubernetes, hyperpod, operation
    object_kind: Mapped[str] = mapped_column(String(60), nullable=False, default="")
    object_name: Mapped[str] = mapped_column(String(300), nullable=False, default="")
    namespace: Mapped[str] = mapped_column(String(253), nullable=False, default="")
    type: Mapped[str] = mapped_column(String(20), nullable=False, default="Normal")
    reason: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    message: Mapped[str] = mapped_column(Text, nullable=False, default="")
    count: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    first_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    last_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


@dataclass
class Entry:
    """One timeline entry to record (an upsert by (cluster_tag, dedupe_key))."""

    cluster_tag: str
    dedupe_key: str
    source: str
    object_kind: str
    object_name: str
    namespace: str
    type: str
    reason: str
    message: str
    count: int
    first_at: datetime
    last_at: datetime


def record(db: Database, entries: list[Entry]) -> int:
    """Insert new entries, update the count/last time/message of known ones; returns how many were new."""
    if not entries:
        return 0
    latest: dict[tuple[str, str], Entry] = {}
    for e in entries:
        latest[(e.cluster_tag, e.dedupe_key)] = e
    new = 0
    with db.session() as session:
        for (tag, key), e in latest.items():
            row = session.scalar(
                select(TimelineRow).where(TimelineRow.cluster_tag == tag, TimelineRow.dedupe_key == key)
            )
            if row is None:
                session.add(TimelineRow(**e.__dict__))
                new += 1
            elif e.source == "usage":  # a pod's hold: the latest observation replaces the last (store.usage)
                row.first_at, row.last_at, row.reason, row.message = e.first_at, e.last_at, e.reason, e.message
            elif e.last_at >= row.last_at or e.count != row.count:
                row.count, row.last_at, row.message, row.type = e.count, max(e.last_at, row.last_at), e.message, e.type
    return new


def query(
    db: Database,
    cluster_tag: str,
    *,
    object_kind: str | None = None,
    object_name: str | None = None,
    object_names: tuple[str, ...] = (),
    object_prefix: str | None = None,
    namespace: str | None = None,
    type_: str | None = None,
    source: str | None = None,
    exclude_source: str | None = None,
    since: datetime | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[TimelineRow]:
    """Entries of one cluster, newest first (by id), filtered; at most `limit`. `object_names`: any of these
    objects; `object_prefix`: the object named so or `<prefix>-…` (a job and its pods); `since`: last seen at or
    after it; `exclude_source`: not from this source."""
    conditions: list[Any] = [TimelineRow.cluster_tag == cluster_tag]
    if object_kind:
        conditions.append(TimelineRow.object_kind == object_kind)
    if object_name:
        conditions.append(TimelineRow.object_name == object_name)
    if object_names:
        conditions.append(TimelineRow.object_name.in_(object_names))
    if object_prefix:
        escaped = object_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        conditions.append(or_(TimelineRow.object_name == object_prefix,
                              TimelineRow.object_name.like(escaped + "-%", escape="\\")))
    if namespace:
        conditions.append(TimelineRow.namespace == namespace)
    if type_:
        conditions.append(TimelineRow.type == type_)
    if source:
        conditions.append(TimelineRow.source == source)
    if exclude_source:
        conditions.append(TimelineRow.source != exclude_source)
    if since is not None:
        conditions.append(TimelineRow.last_at >= since)
    if before_id is not None:
        conditions.append(TimelineRow.id < before_id)
    with db.read_session() as session:
        rows = session.scalars(
            select(TimelineRow).where(*conditions).order_by(TimelineRow.id.desc()).limit(limit)
        ).all()
        for row in rows:
            session.expunge(row)
        return list(rows)


def prune(db: Database, older_than: datetime) -> int:
    """Delete entries last seen before `older_than` (the retention setting); returns how many."""
    with db.session() as session:
        result = session.execute(delete(TimelineRow).where(TimelineRow.last_at < older_than))
        return int(getattr(result, "rowcount", 0) or 0)
