"""Service-account token signing per EKS OIDC issuer, shared by the Kubernetes side (TokenRequest, projected
tokens) and the AWS side (STS AssumeRoleWithWebIdentity): RS256 JWTs, verifiable only with the issuer's key."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

_lock = threading.Lock()
_keys: dict[str, rsa.RSAPrivateKey] = {}


class TokenError(ValueError):
    """A web identity token the twin does not accept, with the reason."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _key(issuer: str) -> rsa.RSAPrivateKey:
    with _lock:
        key = _keys.get(issuer)
        if key is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            _keys[issuer] = key
        return key


def issue(issuer: str, namespace: str, service_account: str, audiences: list[str], seconds: int = 3600,
          pod: str | None = None, now: float | None = None) -> tuple[str, int]:
    """A signed service-account token (what kubelet projects into a pod); (token, expiry epoch seconds)."""
    issued = int(now if now is not None else time.time())
    claims: dict[str, Any] = {
        "iss": issuer,
        "sub": f"system:serviceaccount:{namespace}:{service_account}",
        "aud": audiences,
        "iat": issued,
        "nbf": issued,
        "exp": issued + seconds,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": service_account}},
    }
    if pod:
        claims["kubernetes.io"]["pod"] = {"name": pod}
    header = {"alg": "RS256", "typ": "JWT", "kid": issuer.rsplit("/", 1)[-1]}
    signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = _key(issuer).sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing}.{_b64(signature)}", issued + seconds


def verify(token: str, now: float | None = None) -> dict[str, Any]:
    """The claims of a token signed by a known issuer and not expired; TokenError naming what is wrong."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("the token is not a JWT")
    try:
        claims = json.loads(_unb64(parts[1]))
    except ValueError as exc:
        raise TokenError("the token's payload is not JSON") from exc
    issuer = str(claims.get("iss") or "")
    with _lock:
        key = _keys.get(issuer)
    if key is None:
        raise TokenError(f"no key is known for issuer {issuer!r}")
    try:
        key.public_key().verify(_unb64(parts[2]), f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),
                                hashes.SHA256())
    except Exception as exc:
        raise TokenError("the token's signature is invalid") from exc
    if int(claims.get("exp", 0)) < int(now if now is not None else time.time()):
        raise TokenError("the token has expired")
    return dict(claims)


def reset() -> None:
    """Forget every issuer's key (twin reset)."""
    with _lock:
        _keys.clear()
