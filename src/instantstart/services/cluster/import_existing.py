"""Importing an existing EKS cluster (with or without HyperPod): detect what is there, never own it."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws import eks as eks_api
from instantstart.aws import hyperpod
from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import translate
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import NotFound
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import ClusterFacts
from instantstart.services.base.params import ImportParams, stored
from instantstart.services.base.registry import insert_cluster, record_facts, submit_for_cluster
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, utcnow
from instantstart.validation import ClusterTag, Region


class ImportRequest(WireModel):
    """The EKS cluster to register, and the tag to know it by."""

    eks_cluster_name: str = Field(pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
    cluster_tag: ClusterTag | None = Field(default=None, description="Defaults to a tag derived from the name.")
    region: Region | None = None


def derive_tag(name: str) -> str:
    """A valid cluster tag from an EKS cluster name."""
    base = name.lower().removeprefix("eks-cluster-")
    cleaned = "".join(c if c.isalnum() else "-" for c in base).strip("-")[:32].strip("-")
    return cleaned or "imported"


def detect(app_aws: AwsClients, name: str, region: str) -> dict[str, Any]:
    """What exists around an EKS cluster: network, add-ons, a HyperPod cluster orchestrated by it."""
    cluster = eks_api.describe_cluster(app_aws, region, name)
    if cluster is None:
        raise NotFound(f"EKS cluster {name} does not exist in {region}.", hint="Check the name and Region.")
    vpc = cluster.get("resourcesVpcConfig", {})
    found: dict[str, Any] = {
        "eksClusterName": name,
        "eksClusterArn": cluster.get("arn"),
        "kubernetesVersion": cluster.get("version"),
        "vpcId": vpc.get("vpcId"),
        "eksSubnetIds": vpc.get("subnetIds", []),
        "securityGroupId": (vpc.get("securityGroupIds") or [vpc.get("clusterSecurityGroupId")])[0],
        "authenticationMode": cluster.get("accessConfig", {}).get("authenticationMode"),
        "eksStatus": cluster.get("status"),
    }
    try:
        found["addons"] = sorted(eks_api.list_addons(app_aws, region, name))
        for hp in hyperpod.list_clusters(app_aws, region):
            if hp.get("Orchestrator", {}).get("Eks", {}).get("ClusterArn") == cluster.get("arn"):
                groups = hp.get("InstanceGroups", [])
                found.update(
                    {
                        "hyperpodClusterName": hp["ClusterName"],
                        "hyperpodClusterArn": hp["ClusterArn"],
                        "hyperpodStatus": hp["ClusterStatus"],
                        "executionRoleArn": groups[0].get("ExecutionRole") if groups else None,
                        "instanceGroups": [g["InstanceGroupName"] for g in groups],
                    }
                )
                break
    except Exception as exc:
        raise translate(exc, f"inspect {name}") from exc
    return found


def register_import(db: Database, tag: str, region: str, found: dict[str, Any]) -> None:
    """The cluster row of an imported cluster (nothing in the ledger: it owns nothing); `found` is what
    `detect` saw, stored as the cluster's facts."""
    facts = ClusterFacts.model_validate(found)
    stages = {"eks": "SUCCEEDED" if facts.eks_status == "ACTIVE" else str(facts.eks_status)}
    if facts.hyperpod_cluster_name:
        stages["hyperpod"] = "SUCCEEDED" if facts.hyperpod_status == "InService" else "RUNNING"
    now = utcnow()
    row = ClusterRow(
        tag=tag,
        region=region,
        eks_cluster_name=facts.need("eks_cluster_name"),
        hyperpod_cluster_name=facts.hyperpod_cluster_name,
        imported=True,
        stages=stages,
        details=facts.stored(),
        created_at=now,
        updated_at=now,
    )
    insert_cluster(db, row, hint="Pass another clusterTag.")


async def stage_detect(stage: StageContext) -> dict[str, Any]:
    """Refresh what the imported cluster has (re-runnable)."""
    p = stage.params_as(ImportParams)
    found = await blocking(detect, stage.app.aws, p.eks_cluster_name, p.region)
    await blocking(record_facts, stage.app.db, p.cluster_tag, **found)
    facts = ClusterFacts.model_validate(found)
    await stage.progress(
        f"detected {len(facts.addons)} add-ons"
        + (f" and HyperPod cluster {facts.hyperpod_cluster_name}" if facts.hyperpod_cluster_name else "")
    )
    return found


KINDS.register(OperationKind(name="cluster_import", params=ImportParams, stages=(StageSpec("detect", stage_detect),)))


@operation(
    "cluster_import",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/clusters/import",
    completion="cluster_list_all",
    example={"eksClusterName": "eks-cluster-missing"},
)
async def cluster_import(ctx: CallContext, req: ImportRequest) -> OperationRef:
    """Register an existing EKS cluster (with or without a HyperPod cluster on it) so every tool can act on
    it: detects its network, add-ons and HyperPod cluster. Deleting an imported cluster never removes what
    this control plane did not create. The EKS cluster must exist (NOT_FOUND otherwise)."""
    region = req.region or ctx.app.settings.aws_region
    replayed = await ctx.app.runner.replay(
        "cluster_import", ctx.idempotency_key, status_tool="cluster_list_all", poll_after_seconds=2
    )
    if replayed is not None:
        return replayed
    found = await blocking(detect, ctx.app.aws, req.eks_cluster_name, region)
    tag = req.cluster_tag or derive_tag(req.eks_cluster_name)
    await to_thread.run_sync(register_import, ctx.app.db, tag, region, found)
    return await submit_for_cluster(
        ctx,
        "cluster_import",
        tag,
        stored(ImportParams(cluster_tag=tag, region=region, eks_cluster_name=req.eks_cluster_name)),
        status_tool="cluster_list_all",
        poll_after_seconds=2,
    )
