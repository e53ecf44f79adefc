"""Teams: a team is a namespace on a cluster with a HyperPod compute quota (task governance). One row per team and
cluster: the quota InstantStart created for it, its settings, and the users who are members (a user signed in
through SSO is also a member of the teams their provider groups map to, `store/sso.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from instantstart.store.db import Database
from instantstart.store.models import Base, UTCDateTime, utcnow
from instantstart.store.sso import SsoIdentityRow

NAMESPACE_PREFIX = "hyperpod-ns-"  # the namespace HyperPod task governance creates for a team
LOCAL_QUEUE_SUFFIX = "-localqueue"


def team_namespace(team: str) -> str:
    """The namespace of `team` on every cluster: hyperpod-ns-<team>."""
    return f"{NAMESPACE_PREFIX}{team}"


def team_queue(team: str) -> str:
    """The LocalQueue the task governance add-on creates in the team's namespace."""
    return f"{team_namespace(team)}{LOCAL_QUEUE_SUFFIX}"


class TeamRow(Base):
    """A team on one cluster: its compute quota (SageMaker ComputeQuota id) and members (JSON list of users)."""

    __tablename__ = "teams"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    cluster_tag: Mapped[str] = mapped_column(String(63), ForeignKey("clusters.tag", ondelete="CASCADE"),
                                             primary_key=True)
    quota_id: Mapped[str] = mapped_column(String(16))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # the request's quota fields
    members: Mapped[str] = mapped_column(Text, default="[]")
    created_by: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


@dataclass(frozen=True)
class Team:
    """A team as stored."""

    name: str
    cluster_tag: str
    quota_id: str
    settings: dict[str, Any]
    members: list[str]
    created_by: str
    created_at: datetime

    @property
    def namespace(self) -> str:
        return team_namespace(self.name)

    @property
    def queue(self) -> str:
        return team_queue(self.name)


def _team(row: TeamRow) -> Team:
    return Team(row.name, row.cluster_tag, row.quota_id, dict(row.settings or {}), list(json.loads(row.members)),
                row.created_by, row.created_at)


def list_teams(db: Database, cluster_tag: str | None = None) -> list[Team]:
    """Every team (of one cluster when given), by name then cluster."""
    with db.read_session() as session:
        query = select(TeamRow).order_by(TeamRow.name, TeamRow.cluster_tag)
        if cluster_tag is not None:
            query = query.where(TeamRow.cluster_tag == cluster_tag)
        return [_team(row) for row in session.scalars(query)]


def get_team(db: Database, name: str, cluster_tag: str) -> Team | None:
    """One team of one cluster, or None."""
    with db.read_session() as session:
        row = session.get(TeamRow, (name, cluster_tag))
        return None if row is None else _team(row)


def team_namespaces(db: Database) -> dict[str, list[tuple[str, str]]]:
    """team → [(cluster tag, namespace)] for every team InstantStart manages (what usage reports group by)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for team in list_teams(db):
        out.setdefault(team.name, []).append((team.cluster_tag, team.namespace))
    return out


def save_team(db: Database, team: Team) -> Team:
    """Insert or replace a team's row."""
    with db.session() as session:
        row = session.get(TeamRow, (team.name, team.cluster_tag))
        if row is None:
            row = TeamRow(name=team.name, cluster_tag=team.cluster_tag, created_by=team.created_by)
            session.add(row)
        row.quota_id = team.quota_id
        row.settings = dict(team.settings)
        row.members = json.dumps(sorted(set(team.members)))
        row.updated_at = utcnow()
        session.flush()
        return _team(row)


def delete_team(db: Database, name: str, cluster_tag: str) -> None:
    """Forget a team's row."""
    with db.session() as session:
        row = session.get(TeamRow, (name, cluster_tag))
        if row is not None:
            session.delete(row)


def teams_of(db: Database, user: str, cluster_tag: str) -> list[Team]:
    """The teams of `cluster_tag` `user` belongs to: listed as a member, or mapped from their SSO groups."""
    with db.read_session() as session:
        identity = session.scalars(select(SsoIdentityRow).where(SsoIdentityRow.user == user)).first()
        sso_teams = set(json.loads(identity.teams)) if identity is not None else set()
    return [t for t in list_teams(db, cluster_tag) if user in t.members or t.name in sso_teams]
