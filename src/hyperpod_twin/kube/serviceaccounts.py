"""Service-account tokens: the TokenRequest subresource and the EKS pod identity webhook (IRSA env injection)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hyperpod_twin import oidc
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.kube.store_errors import NotFoundError
from hyperpod_twin.kube.types import core

ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
AUDIENCE_ANNOTATION = "eks.amazonaws.com/audience"
TOKEN_DIR = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
DEFAULT_AUDIENCE = "https://kubernetes.default.svc"


def _service_account(runtime: ClusterRuntime, namespace: str, name: str) -> dict[str, Any]:
    try:
        return runtime.store.get(core("serviceaccounts"), namespace, name)
    except NotFoundError:
        raise ApiError(404, f'serviceaccounts "{name}" not found', "NotFound",
                       {"name": name, "kind": "serviceaccounts"}) from None


def token_request(runtime: ClusterRuntime, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST serviceaccounts/{name}/token: a token signed for the cluster's OIDC issuer (authentication.k8s.io/v1)."""
    _service_account(runtime, namespace, name)
    if not runtime.oidc_issuer:
        raise ApiError(503, "this cluster has no service account issuer", "ServiceUnavailable")
    spec = dict(body.get("spec") or {})
    audiences = [str(a) for a in spec.get("audiences") or [DEFAULT_AUDIENCE]]
    seconds = int(spec.get("expirationSeconds") or 3600)
    if seconds < 600:
        raise ApiError(422, "TokenRequest is invalid: spec.expirationSeconds: may not specify a duration less than "
                       "10 minutes", "Invalid")
    bound = spec.get("boundObjectRef") or {}
    pod = None
    if bound:
        if bound.get("kind") != "Pod":
            raise ApiError(422, "TokenRequest is invalid: spec.boundObjectRef.kind: only Pod is supported here",
                           "Invalid")
        try:
            found = runtime.store.get(core("pods"), namespace, str(bound.get("name")))
        except NotFoundError:
            raise ApiError(404, f'pods "{bound.get("name")}" not found', "NotFound") from None
        if (found.get("spec") or {}).get("serviceAccountName", "default") != name:
            raise ApiError(422, f"TokenRequest is invalid: pod {bound.get('name')} does not use service account "
                           f"{name}", "Invalid")
        pod = str(bound.get("name"))
    token, expires = oidc.issue(runtime.oidc_issuer, namespace, name, audiences, seconds, pod=pod)
    stamp = dt.datetime.fromtimestamp(expires, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": bound or None},
        "status": {"token": token, "expirationTimestamp": stamp},
    }


def inject_web_identity(runtime: ClusterRuntime, namespace: str, pod: dict[str, Any]) -> None:
    """The EKS pod identity webhook: a pod whose service account carries the role annotation gets AWS_ROLE_ARN,
    AWS_WEB_IDENTITY_TOKEN_FILE and a projected token volume (audience sts.amazonaws.com) in every container."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    name = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")
    try:
        sa = runtime.store.get(core("serviceaccounts"), namespace, name)
    except NotFoundError:
        return
    annotations = (sa.get("metadata") or {}).get("annotations") or {}
    role = annotations.get(ROLE_ANNOTATION)
    if not role:
        return
    audience = annotations.get(AUDIENCE_ANNOTATION, "sts.amazonaws.com")
    env = [
        {"name": "AWS_ROLE_ARN", "value": role},
        {"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": f"{TOKEN_DIR}/token"},
        {"name": "AWS_STS_REGIONAL_ENDPOINTS", "value": "regional"},
    ]
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        names = {e.get("name") for e in container.get("env") or []}
        container["env"] = [*(container.get("env") or []), *(e for e in env if e["name"] not in names)]
        mounts = container.setdefault("volumeMounts", [])
        if not any(m.get("name") == "aws-iam-token" for m in mounts):
            mounts.append({"name": "aws-iam-token", "mountPath": TOKEN_DIR, "readOnly": True})
    volumes = spec.setdefault("volumes", [])
    if not any(v.get("name") == "aws-iam-token" for v in volumes):
        volumes.append({"name": "aws-iam-token", "projected": {"sources": [{"serviceAccountToken": {
            "audience": audience, "expirationSeconds": 86400, "path": "token"}}]}})
