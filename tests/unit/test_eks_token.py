"""EKS bearer tokens: the k8s-aws-v1 format, with the cluster name as a signed header."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, urlparse

import boto3
from botocore.config import Config

from instantstart.kube.token import TOKEN_PREFIX, eks_token


def _sts(endpoint: str | None = None) -> object:
    session = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-west-2"
    )
    # The suite points AWS_ENDPOINT_URL at loopback; this test wants botocore's own endpoint resolution.
    config = Config(ignore_configured_endpoint_urls=True)
    return session.client("sts", endpoint_url=endpoint, config=config)


def decode(token: str) -> str:
    body = token[len(TOKEN_PREFIX) :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def test_token_is_a_presigned_get_caller_identity_url() -> None:
    token = eks_token(_sts(), "eks-cluster-demo", now=1000.0)
    assert token.value.startswith(TOKEN_PREFIX) and "=" not in token.value
    assert token.expires_at == 1000.0 + 900
    url = urlparse(decode(token.value))
    assert url.scheme == "https" and url.netloc == "sts.us-west-2.amazonaws.com" and url.path == "/"
    query = parse_qs(url.query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert query["X-Amz-Expires"] == ["60"]
    assert query["X-Amz-SignedHeaders"] == ["host;x-k8s-aws-id"]
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert "X-Amz-Signature" in query
    assert "token" not in repr(token).lower() or "expires_at" in repr(token)


def test_signature_depends_on_the_cluster_name_and_endpoint_override_is_honoured() -> None:
    sts = _sts("http://127.0.0.1:4566")
    first = parse_qs(urlparse(decode(eks_token(sts, "a").value)).query)["X-Amz-Signature"]
    second = parse_qs(urlparse(decode(eks_token(sts, "b").value)).query)["X-Amz-Signature"]
    assert first != second
    assert urlparse(decode(eks_token(sts, "a").value)).netloc == "127.0.0.1:4566"
