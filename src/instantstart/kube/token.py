"""EKS bearer tokens, made in-process: `k8s-aws-v1.` + base64url(presigned STS GetCallerIdentity URL).

The URL is presigned with SigV4 in query-string form with the header `x-k8s-aws-id: <cluster name>`
among the signed headers, exactly as aws-iam-authenticator and `aws eks get-token` do, so the same
code serves real EKS and the twin (whose API servers verify the signature).
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import Any

CLUSTER_ID_HEADER = "x-k8s-aws-id"
TOKEN_PREFIX = "k8s-aws-v1."
PRESIGN_SECONDS = 60
TOKEN_LIFETIME = 15 * 60
REFRESH_AFTER = 14 * 60


@dataclass(frozen=True)
class EksToken:
    """A token and when to stop using it."""

    value: str
    expires_at: float

    def fresh(self, now: float | None = None) -> bool:
        """Whether the token is still safe to send (one minute of margin)."""
        return (now or time.time()) < self.expires_at - (TOKEN_LIFETIME - REFRESH_AFTER)

    def __repr__(self) -> str:  # never print the token
        return f"EksToken(expires_at={self.expires_at})"


def _stash_cluster_id(params: dict[str, Any], context: dict[str, Any], **_kwargs: Any) -> None:
    if CLUSTER_ID_HEADER in params:
        context[CLUSTER_ID_HEADER] = params.pop(CLUSTER_ID_HEADER)


def _add_cluster_id_header(request: Any, **_kwargs: Any) -> None:
    if CLUSTER_ID_HEADER in request.context:
        request.headers[CLUSTER_ID_HEADER] = request.context[CLUSTER_ID_HEADER]


def presigned_url(sts_client: Any, cluster_name: str) -> str:
    """The presigned GetCallerIdentity URL carrying the cluster name as a signed header."""
    events = sts_client.meta.events
    events.register(
        "provide-client-params.sts.GetCallerIdentity", _stash_cluster_id, unique_id="instantstart-k8s-aws-id-params"
    )
    events.register(
        "before-sign.sts.GetCallerIdentity", _add_cluster_id_header, unique_id="instantstart-k8s-aws-id-header"
    )
    url: str = sts_client.generate_presigned_url(
        "get_caller_identity", Params={CLUSTER_ID_HEADER: cluster_name}, ExpiresIn=PRESIGN_SECONDS, HttpMethod="GET"
    )
    return url


def eks_token(sts_client: Any, cluster_name: str, now: float | None = None) -> EksToken:
    """A fresh EKS bearer token for `cluster_name` from an STS client of the cluster's Region."""
    url = presigned_url(sts_client, cluster_name)
    encoded = base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
    issued = now or time.time()
    return EksToken(TOKEN_PREFIX + encoded, issued + TOKEN_LIFETIME)
