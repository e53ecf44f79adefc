"""Per-user API tokens: created (shown once), listed (never the token), revoked; only a digest is stored."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Literal

from anyio import to_thread
from pydantic import Field
from sqlalchemy import select

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import Conflict, NotFound
from instantstart.logs import register_server_secret
from instantstart.services.access.users import USER_NAME, caller
from instantstart.store.access import TokenRow, UserRow, digest, new_token
from instantstart.store.db import Database
from instantstart.store.models import utcnow

TOKEN_NAME = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="Token name: letters, digits, . _ -.")
OWNER = Field(default=None, pattern=USER_NAME, description="Whose token (default: yours; another user's: admin).")


class TokenCreateRequest(WireModel):
    """A new token of a user."""

    name: str = TOKEN_NAME
    user: str | None = OWNER
    expires_in_days: int | None = Field(default=90, ge=1, le=3650, description="Days until it expires (1-3650).")


class TokenListRequest(WireModel):
    """Whose tokens."""

    user: str | None = OWNER


class TokenRevokeRequest(WireModel):
    """The token to revoke, by its name."""

    name: str = TOKEN_NAME
    user: str | None = OWNER


class TokenInfo(WireModel):
    """A token without its secret."""

    id: str
    name: str
    user: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    state: Literal["active", "expired", "revoked"]


class TokenCreated(TokenInfo):
    """A new token: `token` is shown this once and never again (only its SHA-256 digest is kept)."""

    token: str


class TokenList(WireModel):
    """Tokens of one user."""

    tokens: list[TokenInfo]


def _info(row: TokenRow, now: datetime) -> TokenInfo:
    state: Literal["active", "expired", "revoked"] = "active"
    if row.revoked_at is not None:
        state = "revoked"
    elif row.expires_at is not None and row.expires_at <= now:
        state = "expired"
    return TokenInfo(id=row.id, name=row.name, user=row.user, created_at=row.created_at, expires_at=row.expires_at,
                     revoked_at=row.revoked_at, state=state)


def _no_user(user: str) -> NotFound:
    return NotFound(f"No user named {user!r}.", hint="List the users with user_list; an admin creates them.")


def create_token(db: Database, user: str, name: str, days: int | None) -> TokenCreated:
    """Store the digest of a new token for `user`; refuse a name one of their live tokens has."""
    now = utcnow()
    token = new_token()
    with db.session() as session:
        if session.get(UserRow, user) is None:
            raise _no_user(user)
        for row in session.scalars(select(TokenRow).where(TokenRow.user == user, TokenRow.name == name)):
            if _info(row, now).state == "active":
                raise Conflict(f"{user} already has an active token named {name!r}.",
                               hint="Pick another name, or revoke that token first (token_revoke).")
        row = TokenRow(id=secrets.token_hex(8), user=user, name=name, digest=digest(token), created_at=now,
                       expires_at=now + timedelta(days=days) if days else None)
        session.add(row)
        session.flush()
        info = _info(row, now)
    return TokenCreated(**info.model_dump(), token=token)


@operation("token_create", method="POST", path="/tokens", side_effecting=True, idempotent=False,
           example={"name": "ci", "user": "example-missing-user"})
async def token_create(ctx: CallContext, req: TokenCreateRequest) -> TokenCreated:
    """Create a named API token for yourself (or, as admin, for another user) that expires after
    expiresInDays (default 90). The token is in this answer only: it is never stored (only its SHA-256
    digest) and no other call shows it. Send it as `Authorization: Bearer <token>`.

    Side-effecting: it changes the control plane's own users and tokens at once (no operation to poll); it is
    no read, so an agent asks before calling it."""
    user = req.user or caller(ctx).user
    created = await to_thread.run_sync(create_token, ctx.app.db, user, req.name, req.expires_in_days)
    register_server_secret(created.token)  # never in a log line
    return created


def list_tokens(db: Database, user: str) -> list[TokenInfo]:
    """The tokens of `user`, newest first, without their secrets."""
    now = utcnow()
    with db.read_session() as session:
        if session.get(UserRow, user) is None:
            raise _no_user(user)
        rows = session.scalars(select(TokenRow).where(TokenRow.user == user).order_by(TokenRow.created_at.desc()))
        return [_info(row, now) for row in rows]


@operation("token_list", method="GET", path="/tokens", example={})
async def token_list(ctx: CallContext, req: TokenListRequest) -> TokenList:
    """List your API tokens (or, as admin, another user's): name, state, creation and expiry; never the
    token itself."""
    return TokenList(tokens=await to_thread.run_sync(list_tokens, ctx.app.db, req.user or caller(ctx).user))


def revoke_token(db: Database, user: str, name: str) -> TokenInfo:
    """Revoke the newest token of `user` named `name` (again: the same answer)."""
    now = utcnow()
    with db.session() as session:
        rows = list(session.scalars(select(TokenRow).where(TokenRow.user == user, TokenRow.name == name)))
        if not rows:
            raise NotFound(f"{user} has no token named {name!r}.", hint="List them with token_list.")
        live = [row for row in rows if row.revoked_at is None] or rows
        for row in live:
            row.revoked_at = row.revoked_at or now
        return _info(max(live, key=lambda row: row.created_at), now)


@operation("token_revoke", method="POST", path="/tokens/revoke", side_effecting=True, idempotent=True,
           example={"name": "example-missing-token"})
async def token_revoke(ctx: CallContext, req: TokenRevokeRequest) -> TokenInfo:
    """Revoke your API token with this name (or, as admin, another user's): it is refused from its next
    request on, and a web session signed in with it ends.

    Side-effecting: it changes the control plane's own users and tokens at once (no operation to poll); it is
    no read, so an agent asks before calling it."""
    return await to_thread.run_sync(revoke_token, ctx.app.db, req.user or caller(ctx).user, req.name)
