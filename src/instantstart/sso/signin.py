"""From a validated token to a signed-in user: groups -> role and teams, the user created or updated, the
audit trail told (never the token)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread

from instantstart.logs import register_server_secret
from instantstart.principal import Principal
from instantstart.settings import Settings
from instantstart.sso.config import OidcConfig, oidc_config
from instantstart.sso.provider import OidcProvider, TokenRefused, looks_like_jwt
from instantstart.store.access import AuditRow, record_audit
from instantstart.store.db import Database
from instantstart.store.sso import SsoUser, sign_in

TOKEN_NAME = "oidc"  # the token_name of principals the provider signed in
SIGN_IN = "sso_sign_in"  # the audit trail's operation name for sign-ins and refusals


def groups_of(config: OidcConfig, claims: dict[str, Any]) -> list[str]:
    """The groups claim as a list of strings (a single string counts as one group)."""
    raw = claims.get(config.groups_claim, [])
    if isinstance(raw, str):
        return [raw]
    return [g for g in raw if isinstance(g, str)] if isinstance(raw, list) else []


class NoMappedGroup(Exception):
    """The user is in none of the groups the configuration maps to a role; `who` names them for the audit."""

    def __init__(self, who: str) -> None:
        super().__init__(who)
        self.who = who


class SsoGate:
    """Signs users in from the provider's tokens and audits each sign-in and refusal."""

    def __init__(self, provider: OidcProvider, db: Database) -> None:
        self.provider = provider
        self.config = provider.config
        self.db = db
        self._known: dict[str, tuple[str, list[str], SsoUser]] = {}  # subject -> (role, teams, user) last stored

    async def audit(self, user: str, role: str, face: str, source: str, outcome: str, code: str = "") -> None:
        """One audit entry of a sign-in (outcome ok) or a refusal (denied, with `code`)."""
        row = AuditRow(user=user[:64], role=role, token_name=TOKEN_NAME, face=face, source=source[:64],
                       operation=SIGN_IN, outcome=outcome, error_code=code)
        await to_thread.run_sync(record_audit, self.db, row)

    async def user_for(self, claims: dict[str, Any], *, store: bool = True) -> SsoUser:
        """The user the claims describe, stored with the role and teams their groups map to now (an API call
        with `store` False skips the write when nothing changed since the last one); NoMappedGroup when no
        group maps to a role."""
        groups = groups_of(self.config, claims)
        subject = str(claims["sub"])
        email = str(claims.get("email") or "")
        role = self.config.role_for(groups)
        if role is None:
            raise NoMappedGroup(email or subject)
        teams = self.config.teams_for(groups)
        known = self._known.get(subject)
        if not store and known is not None and known[0] == role and known[1] == teams:
            return known[2]
        user = await to_thread.run_sync(sign_in, self.db, subject, email, role, teams)
        if len(self._known) >= 4096:
            self._known.clear()
        self._known[subject] = (role, teams, user)
        return user

    def principal(self, user: SsoUser) -> Principal:
        """The principal of a user the provider signed in."""
        return Principal(user.name, user.role, TOKEN_NAME)

    async def bearer(self, value: str, face: str, source: str) -> tuple[Principal | None, str | None]:
        """The gate's answer for a bearer value that is no API token of ours: (principal, None) for a valid
        provider token, else (None, why not) with the fix."""
        if not looks_like_jwt(value):
            return None, None  # not the provider's: the gate goes on (the session cookie, else 401)
        try:
            user = await self.user_for(await self.provider.validate(value), store=False)
        except TokenRefused as exc:
            await self.audit("unknown", "", face, source, "denied", "INVALID_TOKEN")
            return None, (f"The bearer token was refused: {exc.reason}. Send a current ID token (or JWT access"
                          f" token) from {self.config.issuer} whose aud is this server's client id, or an API token.")
        except NoMappedGroup as exc:
            await self.audit(exc.who, "", face, source, "denied", "NO_MAPPED_GROUP")
            return None, "The provider's token names none of the groups this server maps to a role; ask an admin."
        return self.principal(user).via(face, source), None


def sso_gate(settings: Settings, db: Database) -> SsoGate | None:
    """The SSO sign-in of `settings`' provider (its client secret kept out of every log); None when off."""
    config = oidc_config(settings)
    if config is None:
        return None
    register_server_secret(config.client_secret)
    return SsoGate(OidcProvider(config), db)
