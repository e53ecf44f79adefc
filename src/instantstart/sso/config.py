"""The OpenID Connect provider's configuration (off unless issuer, client id and secret are set) and the
mapping of a groups claim to a role and teams."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from instantstart.errors import InvalidInput
from instantstart.principal import ROLES, role_rank
from instantstart.settings import Settings


@dataclass(frozen=True)
class OidcConfig:
    """One provider: where it is, who we are to it, and how its groups map to our roles and teams."""

    issuer: str
    client_id: str
    client_secret: str = field(repr=False)
    redirect_uri: str
    groups_claim: str = "groups"
    group_roles: dict[str, str] = field(default_factory=dict)
    group_teams: dict[str, list[str]] = field(default_factory=dict)
    scopes: str = "openid email profile"

    def role_for(self, groups: list[str]) -> str | None:
        """The most powerful role any of `groups` maps to; None when none maps."""
        roles = [self.group_roles[g] for g in groups if g in self.group_roles]
        return max(roles, key=role_rank) if roles else None

    def teams_for(self, groups: list[str]) -> list[str]:
        """Every team any of `groups` maps to, sorted, once each."""
        return sorted({team for g in groups for team in self.group_teams.get(g, [])})


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_issuer(issuer: str) -> str:
    """The issuer URL without a trailing slash; https unless the host is loopback (a local test provider)."""
    parts = urlsplit(issuer)
    if not parts.hostname or parts.scheme not in ("http", "https") or (
        parts.scheme == "http" and not _loopback(parts.hostname)
    ):
        raise InvalidInput(
            "INSTANTSTART_OIDC_ISSUER must be an https:// URL (http:// only for a loopback address such as"
            " 127.0.0.1).", hint="Set it to your provider's issuer, e.g. https://login.example.com/realms/main.",
        )
    return issuer.rstrip("/")


def oidc_config(settings: Settings) -> OidcConfig | None:
    """The provider configured in `settings`, checked; None when SSO is off (no issuer set)."""
    if not settings.oidc_issuer:
        return None
    secret = settings.oidc_client_secret.get_secret_value() if settings.oidc_client_secret else ""
    if not secret and settings.oidc_client_secret_file is not None:
        secret = settings.oidc_client_secret_file.read_text().strip()
    if not settings.oidc_client_id or not secret:
        raise InvalidInput(
            "SSO needs INSTANTSTART_OIDC_CLIENT_ID and a client secret (INSTANTSTART_OIDC_CLIENT_SECRET or"
            " INSTANTSTART_OIDC_CLIENT_SECRET_FILE) when INSTANTSTART_OIDC_ISSUER is set.",
            hint="Register this server as a confidential client at the provider and set both.",
        )
    wrong = {g: r for g, r in settings.oidc_group_roles.items() if r not in ROLES}
    if wrong:
        raise InvalidInput(
            f"INSTANTSTART_OIDC_GROUP_ROLES maps groups to unknown roles: {sorted(wrong)}; allowed: {list(ROLES)}.",
            hint='Give a JSON object of group -> role, e.g. {"platform-admins": "admin"}.',
        )
    base = (settings.oidc_redirect_base or settings.base_url).rstrip("/")
    return OidcConfig(
        issuer=check_issuer(settings.oidc_issuer),
        client_id=settings.oidc_client_id,
        client_secret=secret,
        redirect_uri=base + "/auth/oidc/callback",
        groups_claim=settings.oidc_groups_claim,
        group_roles=dict(settings.oidc_group_roles),
        group_teams={g: list(t) for g, t in settings.oidc_group_teams.items()},
        scopes=settings.oidc_scopes,
    )
