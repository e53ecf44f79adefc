"""Who is calling: the authenticated principal (user, role, token name, face, source address) and the roles."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

# The roles, least to most powerful: each may call everything the roles before it may.
ROLES = ("viewer", "member", "operator", "admin")


def role_rank(role: str) -> int:
    """The position of `role` in ROLES (an unknown role ranks below viewer: it may call nothing)."""
    return ROLES.index(role) if role in ROLES else -1


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. `token_name` is the name of the API token used ("bootstrap" for the token file)."""

    user: str
    role: str
    token_name: str
    face: str = "rest"
    source: str = ""

    def at_least(self, role: str) -> bool:
        """Whether this caller's role includes everything `role` may do."""
        return role_rank(self.role) >= role_rank(role)

    def via(self, face: str, source: str) -> Principal:
        """The same caller, seen on `face` from `source` (what the audit trail records)."""
        return Principal(self.user, self.role, self.token_name, face, source)


BOOTSTRAP_USER = "admin"
BOOTSTRAP_TOKEN_NAME = "bootstrap"
FACES = ("rest", "mcp", "cli", "ui")

# The caller of the request being handled, set by the API's gate (the MCP endpoint reads it: its SDK runs the
# tool in a task started from the request, which inherits this context).
current_principal: ContextVar[Principal | None] = ContextVar("current_principal", default=None)
