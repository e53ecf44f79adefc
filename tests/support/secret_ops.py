"""A test-only operation taking a Secret field (loaded as a plugin): the service function writes the value
into a Kubernetes Secret on an EKS cluster and records an operation that names the Secret, never its value.

This is the documented pattern for every tool that takes a token (hfToken and later ones): the value lives
in memory for the length of the call and in the cluster's Secret, nowhere else.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.catalog.secret import Secret
from instantstart.context import CallContext, StageContext
from instantstart.errors import NotFound
from instantstart.kube.apply import apply_object, read_object
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.validation import KubeName, Region

log = logging.getLogger(__name__)


def secret_body(namespace: str, name: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    """A v1 Secret manifest (values base64-encoded as the API stores them)."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}
    if data is not None:
        body["type"] = "Opaque"
        body["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return body


async def verify_stage(ctx: StageContext) -> dict[str, Any]:
    """Prove the Secret exists on the cluster; report its keys only."""
    p = ctx.raw_params
    api = await to_thread.run_sync(ctx.app.kube.api_client, p["eksClusterName"], p["region"])
    live = await to_thread.run_sync(read_object, api, secret_body(p["namespace"], p["secretName"]))
    if live is None:
        raise NotFound(f"Secret {p['namespace']}/{p['secretName']} is missing.")
    return {"secretName": p["secretName"], "namespace": p["namespace"], "keys": sorted(live.get("data") or {})}


KINDS.register(OperationKind(name="secret_probe", stages=(StageSpec("verify", verify_stage, max_attempts=3),)))


class SecretProbeRequest(WireModel):
    """Inputs of the secret probe."""

    eks_cluster_name: str = Field(min_length=1, max_length=100, pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]*$")
    region: Region | None = None
    namespace: KubeName = "default"
    secret_name: KubeName
    token: Secret


@operation(
    "secret_probe_store",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/test/secret-probe",
    completion="operation_get",
    example={"eksClusterName": "probe", "secretName": "probe-token"},
)
async def secret_probe_store(ctx: CallContext, req: SecretProbeRequest) -> OperationRef:
    """Test-only: write `token` into the Kubernetes Secret secretName on the EKS cluster, then record an
    operation (naming the Secret, not its value) that verifies it exists."""
    region = req.region or ctx.app.settings.aws_region
    value = req.token.get_secret_value()
    # A careless log line: the redaction registry must remove the value.
    log.info("secret probe writing token=%s into %s/%s", value, req.namespace, req.secret_name)
    api = await to_thread.run_sync(ctx.app.kube.api_client, req.eks_cluster_name, region)
    manifest = secret_body(req.namespace, req.secret_name, {"token": value})
    await to_thread.run_sync(apply_object, api, manifest)
    params = {
        "eksClusterName": req.eks_cluster_name,
        "region": region,
        "namespace": req.namespace,
        "secretName": req.secret_name,
    }
    return await ctx.app.runner.submit(
        "secret_probe",
        ctx.app.runner.params_model("secret_probe", params),
        target=f"secret-probe:{req.namespace}/{req.secret_name}",
        idempotency_key=ctx.idempotency_key,
        status_tool="operation_get",
        poll_after_seconds=1,
    )
