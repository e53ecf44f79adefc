"""Users and their roles: who is calling (user_me), and the admin's user_create/list/update/delete."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from anyio import to_thread
from pydantic import Field
from sqlalchemy import delete, select

from instantstart.catalog import CATALOG, operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.catalog.roles import allowed
from instantstart.context import CallContext
from instantstart.errors import Conflict, NotFound, PreconditionFailed, Unauthorized
from instantstart.principal import BOOTSTRAP_USER, Principal
from instantstart.store.access import TokenRow, UserRow
from instantstart.store.db import Database

Role = Literal["viewer", "member", "operator", "admin"]
USER_NAME = r"^[a-z][a-z0-9._-]{0,62}$"
NAME_FIELD = Field(pattern=USER_NAME, description="User name: lowercase letters, digits, . _ - (1-63).")


class Me(WireModel):
    """The signed-in caller and what they may call."""

    user: str
    role: str
    token_name: str
    allowed_operations: list[str] = Field(description="Names of the operations this caller's role may call.")


class User(WireModel):
    """One user."""

    name: str
    role: str
    created_at: datetime
    created_by: str


class UserList(WireModel):
    """Every user."""

    users: list[User]


class UserCreateRequest(WireModel):
    """A new user."""

    name: str = NAME_FIELD
    role: Role = Field(description="viewer, member, operator or admin.")


class UserUpdateRequest(WireModel):
    """A user's new role."""

    name: str = NAME_FIELD
    role: Role = Field(description="viewer, member, operator or admin.")


class UserDeleteRequest(WireModel):
    """The user to delete."""

    name: str = NAME_FIELD


def caller(ctx: CallContext) -> Principal:
    """The authenticated caller (every face sets one; an in-process call without one has no user)."""
    if ctx.principal is None:
        raise Unauthorized("This operation needs an authenticated caller.")
    return ctx.principal


def _user(row: UserRow) -> User:
    return User(name=row.name, role=row.role, created_at=row.created_at, created_by=row.created_by)


def _not_found(name: str) -> NotFound:
    return NotFound(f"No user named {name!r}.", hint="List the users with user_list (`instantstart user list`).")


def _fixed(name: str) -> None:
    if name == BOOTSTRAP_USER:
        raise PreconditionFailed(
            f"The user {BOOTSTRAP_USER!r} is the bootstrap admin of the api-token file; it cannot be changed or"
            " deleted.", hint="Create another user instead; remove the token file's access by rotating it.",
        )


@operation("user_me", method="GET", path="/me", example={})
async def user_me(ctx: CallContext, req: NoInput) -> Me:
    """Who is calling: user name, role, the name of the token used, and the names of the operations this
    role may call (the web UI shows only those)."""
    who = caller(ctx)
    return Me(user=who.user, role=who.role, token_name=who.token_name, allowed_operations=allowed(CATALOG, who))


def list_users(db: Database) -> list[User]:
    """Every user, by name."""
    with db.read_session() as session:
        return [_user(row) for row in session.scalars(select(UserRow).order_by(UserRow.name))]


@operation("user_list", method="GET", path="/users", example={})
async def user_list(ctx: CallContext, req: NoInput) -> UserList:
    """List every user with their role (admin only)."""
    return UserList(users=await to_thread.run_sync(list_users, ctx.app.db))


def create_user(db: Database, name: str, role: str, by: str) -> User:
    """Create a user; the same name and role again returns the existing one."""
    with db.session() as session:
        row = session.get(UserRow, name)
        if row is not None:
            if row.role != role:
                raise Conflict(f"The user {name!r} exists with the role {row.role}.",
                               hint="Change a role with user_update (`instantstart user update`).")
            return _user(row)
        row = UserRow(name=name, role=role, created_by=by)
        session.add(row)
        session.flush()
        return _user(row)


@operation("user_create", method="POST", path="/users", side_effecting=True, idempotent=True,
           example={"name": "example-viewer", "role": "viewer"})
async def user_create(ctx: CallContext, req: UserCreateRequest) -> User:
    """Create a user with a role (admin only): viewer reads; member also runs jobs, model servers, model
    downloads and calls models; operator also drives clusters, capacity, features and storage; admin also
    manages users and reads the audit trail. The same name and role again returns the existing user. The user
    has no token yet: create one with token_create.

    Side-effecting: it changes the control plane's own users and tokens at once (no operation to poll); it is
    no read, so an agent asks before calling it."""
    return await to_thread.run_sync(create_user, ctx.app.db, req.name, req.role, caller(ctx).user)


def update_user(db: Database, name: str, role: str) -> User:
    """Give a user another role (the bootstrap admin keeps admin)."""
    _fixed(name)
    with db.session() as session:
        row = session.get(UserRow, name)
        if row is None:
            raise _not_found(name)
        row.role = role
        return _user(row)


@operation("user_update", method="POST", path="/users/{name}/role", side_effecting=True, idempotent=True,
           example={"name": "example-viewer", "role": "viewer"})
async def user_update(ctx: CallContext, req: UserUpdateRequest) -> User:
    """Give a user another role (admin only); it applies to their next call with any of their tokens. The
    bootstrap user `admin` (the api-token file) is always admin.

    Side-effecting: it changes the control plane's own users and tokens at once (no operation to poll); it is
    no read, so an agent asks before calling it."""
    return await to_thread.run_sync(update_user, ctx.app.db, req.name, req.role)


def delete_user(db: Database, name: str, by: str) -> User:
    """Delete a user and every token of theirs."""
    _fixed(name)
    if name == by:
        raise PreconditionFailed("You cannot delete yourself.", hint="Ask another admin.")
    with db.session() as session:
        row = session.get(UserRow, name)
        if row is None:
            raise _not_found(name)
        gone = _user(row)
        session.execute(delete(TokenRow).where(TokenRow.user == name))
        session.delete(row)
        return gone


@operation("user_delete", method="POST", path="/users/{name}/delete", side_effecting=True, idempotent=False,
           example={"name": "example-missing-user"})
async def user_delete(ctx: CallContext, req: UserDeleteRequest) -> User:
    """Delete a user and revoke every token of theirs at once (admin only); returns the deleted user. The
    bootstrap user `admin` and yourself cannot be deleted.

    Side-effecting: it changes the control plane's own users and tokens at once (no operation to poll); it is
    no read, so an agent asks before calling it."""
    return await to_thread.run_sync(delete_user, ctx.app.db, req.name, caller(ctx).user)
