"""The API token: generated at first start into the data dir (0700, token 0600), checked in constant time."""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from instantstart.settings import Settings

TOKEN_FILE = "api-token"


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


def read_token(settings: Settings) -> str | None:
    """The token for a client (CLI, stdio MCP proxy): from settings, else the data dir."""
    if settings.api_token is not None:
        return settings.api_token.get_secret_value()
    path = token_path(settings)
    return path.read_text().strip() if path.exists() else None


def check_bearer(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries the token (constant-time comparison)."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value:
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())
