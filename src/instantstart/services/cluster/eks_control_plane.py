"""EKS: the control plane, created unless it exists (tagged, ledgered) through the `aws.eks` adapter."""

from __future__ import annotations

from typing import Any

from instantstart.aws import eks as eks_api
from instantstart.aws.clients import AwsClients
from instantstart.errors import ProviderError
from instantstart.services.core.installation import installation_id, refuse_foreign
from instantstart.services.core.ledger import TAG_CLUSTER, record, tag_map
from instantstart.store.db import Database

AUTH_MODE = "API_AND_CONFIG_MAP"


def eks_cluster_name(tag: str) -> str:
    """`eks-cluster-<tag>`."""
    return f"eks-cluster-{tag}"


def endpoint_access(public_access_cidrs: list[str]) -> dict[str, Any]:
    """The public-endpoint part of resourcesVpcConfig: never open to the world unless asked for."""
    if not public_access_cidrs:
        return {"endpointPublicAccess": False}
    return {"endpointPublicAccess": True, "publicAccessCidrs": list(public_access_cidrs)}


def ensure_cluster(
    aws: AwsClients,
    db: Database,
    *,
    cluster_tag: str,
    operation_id: str,
    region: str,
    name: str,
    version: str,
    role_arn: str,
    subnet_ids: list[str],
    security_group_id: str,
    public_access_cidrs: list[str],
) -> dict[str, Any]:
    """Start creating the EKS cluster unless it exists; returns its description. The private endpoint is
    always on; the public one only for `public_access_cidrs` (off when the list is empty)."""
    existing = eks_api.describe_cluster(aws, region, name)
    if existing is not None:
        tags = {str(k): str(v) for k, v in (existing.get("tags") or {}).items()}
        refuse_foreign("EKS cluster", name, {TAG_CLUSTER: "", **tags}, cluster_tag, installation_id(db))
        if existing.get("status") in ("FAILED", "DELETING"):
            raise ProviderError(
                f"EKS cluster {name} is {existing['status']}.",
                hint="Delete it (cluster_delete) and create the cluster again.",
            )
        return existing
    request = {
        "name": name,
        "version": version,
        "roleArn": role_arn,
        "resourcesVpcConfig": {
            "subnetIds": subnet_ids,
            "securityGroupIds": [security_group_id],
            "endpointPrivateAccess": True,
            **endpoint_access(public_access_cidrs),
        },
        "accessConfig": {"authenticationMode": AUTH_MODE, "bootstrapClusterCreatorAdminPermissions": True},
        "tags": tag_map(cluster_tag, operation_id, installation_id(db)),
        "clientRequestToken": f"{operation_id}-eks",
    }
    cluster = eks_api.create_cluster(aws, region, request)
    record(
        db,
        cluster_tag=cluster_tag,
        operation_id=operation_id,
        resource_type="eks:cluster",
        resource_id=name,
        region=region,
        details={"arn": cluster.get("arn")},
    )
    return cluster
