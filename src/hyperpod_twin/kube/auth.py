"""EKS bearer-token authentication: verify a presigned STS GetCallerIdentity URL the way EKS does.

A token is `k8s-aws-v1.` + base64url(presigned URL). The URL must be a GetCallerIdentity call to the
twin's own endpoint or to the regional/global STS host, sign the `x-k8s-aws-id` header, be within
15 minutes of its `X-Amz-Date` (on real time), and carry a SigV4 signature that verifies with the
secret key of its access key id for `x-k8s-aws-id = <this cluster's name>`. The server never asks
AWS: the secret comes from a lookup callable the twin supplies, so this module imports nothing of the
AWS side.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote, urlsplit

from hyperpod_twin.kube.authz import Grant

TOKEN_PREFIX = "k8s-aws-v1."
MAX_TOKEN_LENGTH = 4096
TOKEN_LIFETIME = 15 * 60
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
ALLOWED_PARAMS = {
    "action",
    "version",
    "x-amz-algorithm",
    "x-amz-credential",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-signedheaders",
}


@dataclass(frozen=True)
class Principal:
    """Who an access key belongs to: its secret and the canonical IAM ARN it maps to."""

    secret_access_key: str
    arn: str  # arn:aws:iam::<account>:user/<name> or arn:aws:iam::<account>:role/<name>
    user_id: str = ""


@dataclass(frozen=True)
class Identity:
    """An authenticated caller; `grants` are its EKS access policies (None: not restricted)."""

    username: str  # the canonical ARN, or the access entry's username
    uid: str
    groups: tuple[str, ...] = ("system:authenticated",)
    extra: dict[str, list[str]] = field(default_factory=dict)
    grants: tuple[Grant, ...] | None = None


# access key id -> Principal, or None for an unknown key
CredentialLookup = Callable[[str], Principal | None]


class AuthError(Exception):
    """The token is not acceptable; the message says why (logged, not sent to the client)."""


@dataclass
class EksTokenVerifier:
    """Verifies EKS bearer tokens for one cluster."""

    cluster_name: str
    lookup: CredentialLookup
    allowed_hosts: tuple[str, ...]  # host[:port] values a token URL may name
    clock: Callable[[], float] = time.time

    def verify(self, authorization: str | None) -> Identity:
        """The caller of an `Authorization` header value; AuthError when it is not a valid EKS token."""
        if not authorization or not authorization.startswith("Bearer "):
            raise AuthError("no bearer token")
        token = authorization[len("Bearer ") :].strip()
        if len(token) > MAX_TOKEN_LENGTH:
            raise AuthError("token too long")
        if not token.startswith(TOKEN_PREFIX):
            raise AuthError("token lacks the k8s-aws-v1. prefix")
        encoded = token[len(TOKEN_PREFIX) :]
        try:
            url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError) as err:
            raise AuthError("token is not base64url") from err
        return self._verify_url(url)

    def _verify_url(self, url: str) -> Identity:
        parts = urlsplit(url)
        host = parts.netloc.lower()
        sts_hosts = {"sts.amazonaws.com"} | {h for h in self.allowed_hosts if h.startswith("sts.")}
        if host in sts_hosts:
            if parts.scheme != "https":
                raise AuthError("STS URL must be https")
        elif host not in self.allowed_hosts:
            raise AuthError(f"unexpected STS host {host}")
        if parts.path not in ("/", ""):
            raise AuthError("unexpected path")
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        params: dict[str, str] = {}
        for key, value in pairs:
            if key.lower() not in ALLOWED_PARAMS:
                raise AuthError(f"query parameter {key} not allowed")
            if key in params:
                raise AuthError(f"query parameter {key} repeated")
            params[key] = value
        lower = {k.lower(): v for k, v in params.items()}
        if lower.get("action") != "GetCallerIdentity":
            raise AuthError("not a GetCallerIdentity call")
        signed = lower.get("x-amz-signedheaders", "").split(";")
        if "x-k8s-aws-id" not in signed:
            raise AuthError("x-k8s-aws-id is not signed")
        try:
            expires = int(lower.get("x-amz-expires", "0"))
            signed_at = datetime.strptime(lower.get("x-amz-date", ""), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError as err:
            raise AuthError("bad X-Amz-Date or X-Amz-Expires") from err
        if not 0 <= expires <= 900:
            raise AuthError("X-Amz-Expires out of range")
        now = self.clock()
        if now > signed_at.timestamp() + TOKEN_LIFETIME:
            raise AuthError("token expired")
        if signed_at.timestamp() > now + 300:
            raise AuthError("token from the future")
        if lower.get("x-amz-algorithm") != "AWS4-HMAC-SHA256":
            raise AuthError("unsupported signing algorithm")
        scope = lower.get("x-amz-credential", "").split("/")
        if len(scope) != 5 or scope[3] != "sts" or scope[4] != "aws4_request":
            raise AuthError("bad credential scope")
        access_key, date, region = scope[0], scope[1], scope[2]
        if date != lower["x-amz-date"][:8]:
            raise AuthError("credential date does not match X-Amz-Date")
        principal = self.lookup(access_key)
        if principal is None:
            raise AuthError("unknown access key")
        header_values: dict[str, str] = {"host": parts.netloc, "x-k8s-aws-id": self.cluster_name}
        unknown = [h for h in signed if h not in header_values]
        if unknown:
            raise AuthError(f"cannot verify signed headers {unknown}")
        canonical_query = "&".join(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
            for k, v in sorted(pairs)
            if k.lower() != "x-amz-signature"
        )
        canonical_headers = "".join(f"{h}:{header_values[h].strip()}\n" for h in signed)
        signing_key = _signing_key(principal.secret_access_key, date, region, "sts")
        given = lower.get("x-amz-signature", "")
        for payload_hash in (EMPTY_SHA256, "UNSIGNED-PAYLOAD"):
            canonical = "\n".join(
                ["GET", quote(parts.path or "/", safe="/-_.~"), canonical_query, canonical_headers,
                 ";".join(signed), payload_hash]
            )
            to_sign = "\n".join(
                ["AWS4-HMAC-SHA256", lower["x-amz-date"], "/".join(scope[1:]),
                 hashlib.sha256(canonical.encode()).hexdigest()]
            )
            expected = hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()
            if hmac.compare_digest(expected, given):
                return Identity(
                    username=principal.arn,
                    uid=f"aws-iam-authenticator:{principal.arn.split(':')[4]}:{principal.user_id or access_key}",
                    extra={"accessKeyId": [access_key], "arn": [principal.arn]},
                )
        raise AuthError("signature does not match (wrong cluster name, key or tampered token)")


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sts_hosts_for(region: str) -> tuple[str, ...]:
    """The real STS hosts a token may name for `region`."""
    return (f"sts.{region}.amazonaws.com", "sts.amazonaws.com")
