"""Test helper: make an EKS bearer token the way aws-iam-authenticator and `aws eks get-token` do."""

from __future__ import annotations

import base64
from typing import Any

import boto3
from botocore.client import BaseClient

TOKEN_PREFIX = "k8s-aws-v1."


def _sts_client(access_key: str, secret_key: str, region: str, endpoint_url: str | None) -> BaseClient:
    session = boto3.session.Session(
        aws_access_key_id=access_key, aws_secret_access_key=secret_key, region_name=region
    )
    # Explicit, so an AWS_ENDPOINT_URL in the environment never redirects the presigned URL.
    endpoint = endpoint_url or f"https://sts.{region}.amazonaws.com"
    return session.client("sts", region_name=region, endpoint_url=endpoint)


def eks_token(
    cluster_name: str,
    *,
    access_key: str,
    secret_key: str,
    region: str = "us-west-2",
    endpoint_url: str | None = None,
) -> str:
    """Presign STS GetCallerIdentity with header x-k8s-aws-id=<cluster> (SigV4 query auth, 60 s expiry)
    and wrap the URL as `k8s-aws-v1.` + unpadded base64url (FACTS §4.4)."""
    sts = _sts_client(access_key, secret_key, region, endpoint_url)

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers["x-k8s-aws-id"] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", add_cluster_header)
    url = sts.generate_presigned_url("get_caller_identity", Params={}, ExpiresIn=60, HttpMethod="GET")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
