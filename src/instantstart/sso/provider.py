"""Talking to the OpenID Connect provider: discovery, its signing keys (refetched once on an unknown key id, so
key rotation works), the authorization-code exchange, and validating an ID token or JWT access token."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt

from instantstart.sso.config import OidcConfig

# Asymmetric algorithms only: "none" and the HMAC family (keyed with the public client secret) are refused.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_SECONDS = 60


class TokenRefused(Exception):
    """A token the provider did not issue for us, or no longer valid; `reason` says which (never the token)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, its S256 code_challenge)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def looks_like_jwt(value: str) -> bool:
    """Whether a bearer value has a JWT's three dot-separated parts (our own API tokens never do)."""
    return value.count(".") == 2 and not value.startswith("isk_")


class OidcProvider:
    """The configured provider as this server sees it; discovery and keys are fetched lazily and cached."""

    def __init__(self, config: OidcConfig, http: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self.http = http or httpx.AsyncClient(timeout=10.0, follow_redirects=False)
        self._discovery: dict[str, Any] | None = None
        self._keys: dict[str, jwt.PyJWK] = {}
        self._lock = asyncio.Lock()

    async def discovery(self) -> dict[str, Any]:
        """The provider's /.well-known/openid-configuration (its issuer must be the configured one)."""
        if self._discovery is None:
            response = await self.http.get(self.config.issuer + "/.well-known/openid-configuration")
            response.raise_for_status()
            doc = response.json()
            if not isinstance(doc, dict) or doc.get("issuer", "").rstrip("/") != self.config.issuer:
                raise TokenRefused("the provider's discovery document names another issuer")
            self._discovery = doc
        return self._discovery

    async def authorize_url(self, state: str, nonce: str, challenge: str) -> str:
        """Where to send the browser: an authorization-code request with PKCE S256, state and nonce."""
        query = {
            "response_type": "code", "client_id": self.config.client_id, "redirect_uri": self.config.redirect_uri,
            "scope": self.config.scopes, "state": state, "nonce": nonce, "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        return str((await self.discovery())["authorization_endpoint"]) + "?" + urlencode(query)

    async def exchange(self, code: str, verifier: str) -> str:
        """The ID token for an authorization code (client secret + code_verifier at the token endpoint)."""
        response = await self.http.post(
            str((await self.discovery())["token_endpoint"]),
            data={"grant_type": "authorization_code", "code": code, "redirect_uri": self.config.redirect_uri,
                  "code_verifier": verifier},
            auth=(self.config.client_id, self.config.client_secret),
        )
        if response.status_code != 200:
            raise TokenRefused(f"the provider refused the code exchange ({response.status_code})")
        token = response.json().get("id_token")
        if not isinstance(token, str):
            raise TokenRefused("the provider returned no ID token")
        return token

    async def _signing_keys(self, refresh: bool) -> dict[str, jwt.PyJWK]:
        async with self._lock:
            if refresh or not self._keys:
                response = await self.http.get(str((await self.discovery())["jwks_uri"]))
                response.raise_for_status()
                found = jwt.PyJWKSet.from_dict(response.json())
                self._keys = {key.key_id: key for key in found.keys if key.key_id}
            return self._keys

    async def _key(self, kid: str) -> jwt.PyJWK:
        keys = await self._signing_keys(refresh=False)
        if kid not in keys:  # rotated: refetch once
            keys = await self._signing_keys(refresh=True)
        if kid not in keys:
            raise TokenRefused("its signing key is not among the provider's keys")
        return keys[kid]

    async def validate(self, token: str, nonce: str | None = None) -> dict[str, Any]:
        """The claims of a token signed by the provider's key, with iss == the issuer, aud == our client id,
        exp/iat within LEEWAY_SECONDS and, for a sign-in, the nonce we sent; TokenRefused otherwise."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused("it is not a JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS or not isinstance(kid, str):
            raise TokenRefused("it is not signed with an asymmetric key named by a kid")
        key = await self._key(kid)
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key, algorithms=[alg], audience=self.config.client_id, issuer=self.config.issuer,
                leeway=LEEWAY_SECONDS, options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("it has expired") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused("it was issued for another audience (aud is not this server's client id)") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("it was issued by another issuer") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("its signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"it is invalid ({type(exc).__name__})") from None
        if nonce is not None and claims.get("nonce") != nonce:
            raise TokenRefused("its nonce is not the one this sign-in sent")
        return claims
