"""API tokens: the bootstrap token (generated at first start into the data dir, 0700/0600) and the users' tokens."""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from instantstart.client_config import TOKEN_FILE
from instantstart.principal import BOOTSTRAP_TOKEN_NAME, BOOTSTRAP_USER, Principal
from instantstart.settings import Settings
from instantstart.store.access import live_token, resolve
from instantstart.store.db import Database
from instantstart.store.sso import SSO_SESSION, user_role


def token_path(settings: Settings) -> Path:
    """Where the token lives."""
    return settings.data_dir / TOKEN_FILE


class InsecureFileMode(Exception):
    """A file holding a secret can be read by other users; the server refuses to start."""


def private_dir(path: Path) -> None:
    """Create `path` (and parents) as a directory only its owner can enter: mode 0700, tightened if looser."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o700)


def check_token_file(path: Path) -> None:
    """Refuse a token file that the group or other users can read or write, saying how to fix it."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise InsecureFileMode(
            f"The API token file {path} has mode {mode:04o}: other users can read the token. "
            f"Run `chmod 600 {path}` (or delete it to have a new token generated), then start again."
        )


def ensure_token(settings: Settings) -> tuple[str, bool]:
    """The API token, creating it on first start. Returns (token, created_now).

    Raises InsecureFileMode when an existing token file is group- or world-accessible."""
    if settings.api_token is not None:
        return settings.api_token.get_secret_value(), False
    path = token_path(settings)
    private_dir(settings.data_dir)
    if path.exists():
        check_token_file(path)
        return path.read_text().strip(), False
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token, True


def check_bearer(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries the token (constant-time comparison)."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value:
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


def bearer_value(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class Authenticator:
    """Who a presented token belongs to: the bootstrap token (the api-token file) is the bootstrap admin's;
    any other is looked up by its SHA-256 digest among the users' live tokens."""

    def __init__(self, bootstrap_token: str, db: Database) -> None:
        self.bootstrap_token = bootstrap_token
        self.db = db

    def bootstrap(self, token: str) -> Principal | None:
        """The bootstrap admin when `token` is the token file's (constant-time; no database read)."""
        if hmac.compare_digest(token.encode(), self.bootstrap_token.encode()):
            return Principal(BOOTSTRAP_USER, "admin", BOOTSTRAP_TOKEN_NAME)
        return None

    def resolve(self, token: str | None) -> tuple[Principal, str | None] | None:
        """(principal, token id) for a valid token — the id is None for the bootstrap token; else None.
        Reads the database: call it off the event loop."""
        if not token:
            return None
        admin = self.bootstrap(token)
        if admin is not None:
            return admin, None
        owner = resolve(self.db, token)
        return None if owner is None else (Principal(owner.user, owner.role, owner.token_name), owner.token_id)

    def recheck(self, principal: Principal, token_id: str | None) -> Principal | None:
        """A signed-in session's principal again: None once its token is revoked or expired or its user
        deleted; the user's current role otherwise."""
        if token_id is None:
            return principal
        if token_id == SSO_SESSION:  # signed in through the SSO provider: the user must still exist
            role = user_role(self.db, principal.user)
            return None if role is None else Principal(principal.user, role, principal.token_name)
        owner = live_token(self.db, token_id)
        return None if owner is None else Principal(owner.user, owner.role, owner.token_name)
