"""STS AssumeRoleWithWebIdentity that checks what AWS checks (moto accepts any token for any role): the token
is signed by a known issuer and unexpired, an IAM OIDC provider exists for that issuer with the token's audience
as a client id, and the role's trust allows that provider with conditions matching the token's sub and aud."""

from __future__ import annotations

import fnmatch
import json
from typing import Any
from urllib.parse import unquote

from hyperpod_twin import oidc

from .context import AwsContext
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse

ACTION = "sts:AssumeRoleWithWebIdentity"


def _listify(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _conditions_hold(conditions: dict[str, Any], host: str, claims: dict[str, Any]) -> bool:
    values = {f"{host}:sub": [claims.get("sub")], f"{host}:aud": _listify(claims.get("aud")),
              f"{host}:amr": []}
    for operator, pairs in conditions.items():
        if operator not in ("StringEquals", "StringLike"):
            return False  # an operator the twin does not evaluate never grants
        for key, wanted in pairs.items():
            have = values.get(key)
            if have is None:
                return False
            match = (lambda h, w: h == w) if operator == "StringEquals" else (
                lambda h, w: fnmatch.fnmatchcase(str(h), str(w)))
            if not any(match(h, w) for h in have for w in _listify(wanted)):
                return False
    return True


def trust_allows(trust: dict[str, Any], provider_arn: str, host: str, claims: dict[str, Any]) -> bool:
    """Whether a trust policy lets this provider's token with these claims assume the role (no Deny modelled
    beyond an explicit Deny statement for the same principal)."""
    allowed = False
    for statement in _listify(trust.get("Statement") or []):
        principal = (statement.get("Principal") or {}).get("Federated")
        if provider_arn not in _listify(principal):
            continue
        if ACTION not in _listify(statement.get("Action")):
            continue
        if not _conditions_hold(statement.get("Condition") or {}, host, claims):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    return allowed


def register(ctx: AwsContext) -> None:
    """Answer AssumeRoleWithWebIdentity checks; moto issues the credentials when they pass."""

    @ctx.route("sts", "AssumeRoleWithWebIdentity")
    def assume(req: AwsRequest) -> RawResponse:
        role_arn = str(req.params.get("RoleArn") or "")
        token = str(req.params.get("WebIdentityToken") or "")
        try:
            claims = oidc.verify(token)
        except oidc.TokenError as exc:
            raise AwsError("InvalidIdentityToken", f"The web identity token is not valid: {exc}.") from None
        issuer = str(claims["iss"])
        host = issuer.removeprefix("https://")
        iam = ctx.iam()
        with ctx.locked():
            provider = next((p for p in iam.open_id_providers.values()
                             if str(p.url).removeprefix("https://") == host), None)
            if provider is None:
                raise AwsError("InvalidIdentityToken",
                               f"No OpenIDConnect provider found in your account for {issuer}")
            audiences = _listify(claims.get("aud"))
            if not set(audiences) & set(provider.client_id_list or []):
                raise AwsError("InvalidIdentityToken",
                               "Incorrect token audience")
            role = next((r for r in iam.roles.values() if r.arn == role_arn), None)
            if role is None:
                raise AwsError("AccessDenied", f"Not authorized to perform {ACTION}", 403)
            document = role.assume_role_policy_document
            trust = json.loads(unquote(document) if isinstance(document, str) else json.dumps(document))
        if not trust_allows(trust, provider.arn, host, claims):
            raise AwsError("AccessDenied", f"Not authorized to perform {ACTION}", 403)
        raise PassThrough()
