"""The API token: generated at first start into the data dir (mode 0600), checked in constant time."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from instantstart.settings import Settings

TOKEN_FILE = "api-token"


def token_path(settings: Settings) -> Path:
    """Where the token lives."""
    return settings.data_dir / TOKEN_FILE


def ensure_token(settings: Settings) -> tuple[str, bool]:
    """The API token, creating it on first start. Returns (token, created_now)."""
    if settings.api_token is not None:
        return settings.api_token.get_secret_value(), False
    path = token_path(settings)
    if path.exists():
        return path.read_text().strip(), False
    settings.data_dir.mkdir(parents=True, exist_ok=True)
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
