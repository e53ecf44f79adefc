"""EKS bearer-token authentication: only a valid presigned GetCallerIdentity for this cluster gets in."""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import kubernetes
import pytest

from hyperpod_twin.kube.auth import AuthError, EksTokenVerifier, sts_hosts_for
from tests.support.eks_token import TOKEN_PREFIX, eks_token
from tests.support.twin_kube import ACCESS_KEY, CALLER_ARN, CLUSTER, REGION, SECRET_KEY, Cluster, client_for, lookup


def _url_of(token: str) -> str:
    encoded = token[len(TOKEN_PREFIX) :]
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()


def _token_of(url: str) -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def _with_params(token: str, **changes: str | None) -> str:
    parts = urlsplit(_url_of(token))
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return _token_of(urlunsplit(parts._replace(query=urlencode(params))))


@pytest.fixture(scope="module")
def verifier() -> EksTokenVerifier:
    return EksTokenVerifier(CLUSTER, lookup, sts_hosts_for(REGION))


@pytest.fixture(scope="module")
def good_token() -> str:
    return eks_token(CLUSTER, access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION)


def test_valid_token_maps_to_the_iam_identity(verifier: EksTokenVerifier, good_token: str) -> None:
    url = urlsplit(_url_of(good_token))
    assert url.netloc == f"sts.{REGION}.amazonaws.com"
    assert "x-k8s-aws-id" in dict(parse_qsl(url.query))["X-Amz-SignedHeaders"]
    identity = verifier.verify("Bearer " + good_token)
    assert identity.username == CALLER_ARN
    assert "system:authenticated" in identity.groups


def test_token_for_another_cluster_is_rejected(verifier: EksTokenVerifier) -> None:
    other = eks_token("some-other-cluster", access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION)
    with pytest.raises(AuthError, match="signature"):
        verifier.verify("Bearer " + other)


def test_expired_token_is_rejected(verifier: EksTokenVerifier, good_token: str) -> None:
    later = EksTokenVerifier(CLUSTER, lookup, sts_hosts_for(REGION), clock=lambda: time.time() + 16 * 60)
    with pytest.raises(AuthError, match="expired"):
        later.verify("Bearer " + good_token)
    # Moving the date back re-signs nothing: the signature no longer matches either.
    stale = _with_params(good_token, **{"X-Amz-Date": "20200101T000000Z"})
    with pytest.raises(AuthError):
        verifier.verify("Bearer " + stale)


def test_tampered_signature_is_rejected(verifier: EksTokenVerifier, good_token: str) -> None:
    signature = dict(parse_qsl(urlsplit(_url_of(good_token)).query))["X-Amz-Signature"]
    flipped = ("0" if signature[0] != "0" else "1") + signature[1:]
    with pytest.raises(AuthError, match="signature"):
        verifier.verify("Bearer " + _with_params(good_token, **{"X-Amz-Signature": flipped}))


def test_token_without_the_cluster_header_signed_is_rejected(verifier: EksTokenVerifier) -> None:
    import boto3

    sts = boto3.session.Session(
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION
    ).client("sts", region_name=REGION, endpoint_url=f"https://sts.{REGION}.amazonaws.com")
    url = sts.generate_presigned_url("get_caller_identity", Params={}, ExpiresIn=60, HttpMethod="GET")
    with pytest.raises(AuthError, match="x-k8s-aws-id"):
        verifier.verify("Bearer " + _token_of(url))


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Basic dXNlcjpwYXNz",
        "Bearer not-an-eks-token",
        "Bearer k8s-aws-v1.!!!",
        "Bearer " + _token_of("https://evil.example.com/?Action=GetCallerIdentity&Version=2011-06-15"),
    ],
)
def test_malformed_headers_are_rejected(verifier: EksTokenVerifier, header: str | None) -> None:
    with pytest.raises(AuthError):
        verifier.verify(header)


def test_unknown_access_key_and_wrong_secret_are_rejected(verifier: EksTokenVerifier) -> None:
    stranger = eks_token(CLUSTER, access_key="AKIANOBODYKNOWSME001", secret_key=SECRET_KEY, region=REGION)
    with pytest.raises(AuthError, match="unknown access key"):
        verifier.verify("Bearer " + stranger)
    forged = eks_token(CLUSTER, access_key=ACCESS_KEY, secret_key="not-the-secret", region=REGION)
    with pytest.raises(AuthError, match="signature"):
        verifier.verify("Bearer " + forged)


def test_token_presigned_against_the_twin_endpoint_is_accepted() -> None:
    twin_host = "127.0.0.1:4566"
    verifier = EksTokenVerifier(CLUSTER, lookup, (twin_host, *sts_hosts_for(REGION)))
    token = eks_token(CLUSTER, access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                      endpoint_url=f"http://{twin_host}")
    assert urlsplit(_url_of(token)).netloc == twin_host
    assert verifier.verify("Bearer " + token).username == CALLER_ARN
    elsewhere = EksTokenVerifier(CLUSTER, lookup, sts_hosts_for(REGION))
    with pytest.raises(AuthError, match="host"):
        elsewhere.verify("Bearer " + token)


def _raw_get(cluster: Cluster, path: str, token: str | None) -> tuple[int, dict[str, object]]:
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    request = urllib.request.Request(cluster.url + path)
    if token is not None:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_server_answers_401_status_for_bad_tokens(cluster: Cluster) -> None:
    other = eks_token("some-other-cluster", access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION)
    for token in (None, "garbage", other, _with_params(cluster.token, **{"X-Amz-Signature": "0" * 64})):
        code, body = _raw_get(cluster, "/api/v1/namespaces", token)
        assert code == 401
        assert body["kind"] == "Status" and body["reason"] == "Unauthorized" and body["code"] == 401
    code, body = _raw_get(cluster, "/api/v1/namespaces", cluster.token)
    assert code == 200 and body["kind"] == "NamespaceList"
    # /version is public, as on EKS.
    assert _raw_get(cluster, "/version", None)[0] == 200


def test_python_client_and_kubectl_get_401_with_a_bad_token(cluster: Cluster, tmp_path: object) -> None:
    other = eks_token("some-other-cluster", access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION)
    api = client_for(cluster.url, cluster.ca_file, other)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        kubernetes.client.CoreV1Api(api).list_namespace()
    assert caught.value.status == 401
    api.close()
    result = cluster.kubectl("get", "namespaces", f"--token={other}", check=False)
    assert result.returncode != 0
    assert "Unauthorized" in result.stderr or "provide credentials" in result.stderr
    whoami = cluster.kubectl("auth", "whoami", "-o", "json")
    assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == CALLER_ARN
