"""Users who sign in through the OpenID Connect provider: one row per subject, bound to one user, whose role
is rewritten from the provider's groups at every sign-in."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from instantstart.store.access import UserRow
from instantstart.store.db import Database
from instantstart.store.models import Base, UTCDateTime, utcnow

SSO_SOURCE = "oidc"  # users.created_by of the users the provider signs in
SSO_SESSION = "sso"  # the token id of a browser session the provider signed in (no API token behind it)


class SsoIdentityRow(Base):
    """The provider's subject of a user, their email and the teams their groups map to."""

    __tablename__ = "sso_identities"
    __table_args__ = (Index("ix_sso_identities_user", "user", unique=True),)

    subject: Mapped[str] = mapped_column(String(255), primary_key=True)
    user: Mapped[str] = mapped_column(String(64), ForeignKey("users.name", ondelete="CASCADE"))
    email: Mapped[str] = mapped_column(String(320))
    teams: Mapped[str] = mapped_column(Text)  # JSON list
    signed_in_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


@dataclass(frozen=True)
class SsoUser:
    """A user as the provider last described them."""

    name: str
    role: str
    subject: str
    email: str
    teams: list[str]


def _base_name(subject: str, email: str) -> str:
    local = re.sub(r"[^a-z0-9._-]+", "-", email.split("@", 1)[0].lower()).strip("-._")
    return local[:50] if local and local[0].isalpha() else "sso-" + hashlib.sha256(subject.encode()).hexdigest()[:12]


def sign_in(db: Database, subject: str, email: str, role: str, teams: list[str]) -> SsoUser:
    """Create or update the user bound to `subject` with `role` and `teams` (at every sign-in, so a group
    removed at the provider takes its role away). A new subject gets a name from its email's local part, with
    a suffix from the subject when that name is another user's (an SSO user never takes over a local one)."""
    with db.session() as session:
        identity = session.get(SsoIdentityRow, subject)
        if identity is None:
            name = _base_name(subject, email)
            if session.get(UserRow, name) is not None:
                name = f"{name}-{hashlib.sha256(subject.encode()).hexdigest()[:8]}"
            identity = SsoIdentityRow(subject=subject, user=name, email=email, teams="[]")
            session.add(UserRow(name=name, role=role, created_by=SSO_SOURCE))
            session.flush()
            session.add(identity)
        user = session.get(UserRow, identity.user)
        if user is None:  # deleted by an admin since: signing in again creates it again
            user = UserRow(name=identity.user, role=role, created_by=SSO_SOURCE)
            session.add(user)
        user.role = role
        identity.email = email
        identity.teams = json.dumps(teams)
        identity.signed_in_at = utcnow()
        return SsoUser(identity.user, role, subject, email, teams)


def sso_user(db: Database, name: str) -> SsoUser | None:
    """The SSO identity of user `name`, if it signed in through the provider."""
    with db.read_session() as session:
        row = session.execute(
            select(SsoIdentityRow, UserRow).join(UserRow, UserRow.name == SsoIdentityRow.user)
            .where(SsoIdentityRow.user == name)
        ).first()
        if row is None:
            return None
        identity, user = row
        return SsoUser(user.name, user.role, identity.subject, identity.email, json.loads(identity.teams))


def user_role(db: Database, name: str) -> str | None:
    """The current role of user `name`; None once deleted (an SSO session then ends)."""
    with db.read_session() as session:
        row = session.get(UserRow, name)
        return None if row is None else row.role
