"""What a client of the control plane (CLI, `instantstart mcp`) needs of the settings, read without pydantic."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from instantstart.settings import Settings

PREFIX = "INSTANTSTART_"
TOKEN_FILE = "api-token"  # in the data dir, written by the server at first start


def base_url(server_url: str | None, host: str, port: int, tls: bool) -> str:
    """The server's URL as clients should reach it: `server_url`, else the bound host and port."""
    if server_url:
        return server_url.rstrip("/")
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"{'https' if tls else 'http'}://{host}:{port}"


@dataclass(frozen=True)
class ClientConfig:
    """The server's URL, the token to present (None: none set or stored), and the plugins adding operations."""

    url: str
    token: str | None
    data_dir: Path
    plugins: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> ClientConfig:
        """The client's view of full Settings."""
        token = settings.api_token.get_secret_value() if settings.api_token is not None else None
        return cls(settings.base_url, token or stored_token(settings.data_dir), settings.data_dir,
                   tuple(settings.plugins))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> ClientConfig:
        """The same values Settings() reads from INSTANTSTART_* variables (names case-insensitive, as there)."""
        env = {key.upper(): value for key, value in environ.items() if key.upper().startswith(PREFIX)}

        def get(name: str) -> str | None:
            return env.get(PREFIX + name)

        port_text = get("PORT") or "3099"
        try:
            port = int(port_text)
        except ValueError:
            port = 0
        if not 1 <= port <= 65535:
            raise ValueError(f"INSTANTSTART_PORT must be a port number from 1 to 65535, not {port_text!r}")
        data_dir = Path(get("DATA_DIR") or Path.home() / ".instantstart")
        plugins = json.loads(get("PLUGINS") or "[]")
        if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
            raise ValueError('INSTANTSTART_PLUGINS must be a JSON list of module names, e.g. ["my.ops"]')
        url = base_url(get("SERVER_URL"), get("HOST") or "127.0.0.1", port, bool(get("TLS_CERT_FILE")))
        return cls(url, get("API_TOKEN") or stored_token(data_dir), data_dir, tuple(plugins))


def stored_token(data_dir: Path) -> str | None:
    """The bootstrap token the server stored in `data_dir`, if any."""
    path = data_dir / TOKEN_FILE
    return path.read_text().strip() if path.exists() else None
