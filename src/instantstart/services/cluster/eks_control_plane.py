"""EKS: the control plane (created and waited for), access for the control plane's identity, status."""

from __future__ import annotations

from typing import Any

from instantstart.aws.errors import error_code, translate
from instantstart.errors import CapacityUnavailable, InstantStartError, ProviderError
from instantstart.services.core.ledger import record, tag_map
from instantstart.store.db import Database

ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
AUTH_MODE = "API_AND_CONFIG_MAP"


def eks_cluster_name(tag: str) -> str:
    """`eks-cluster-<tag>`."""
    return f"eks-cluster-{tag}"


def endpoint_access(public_access_cidrs: list[str]) -> dict[str, Any]:
    """The public-endpoint part of resourcesVpcConfig: never open to the world unless asked for."""
    if not public_access_cidrs:
        return {"endpointPublicAccess": False}
    return {"endpointPublicAccess": True, "publicAccessCidrs": list(public_access_cidrs)}


def describe(eks: Any, name: str) -> dict[str, Any] | None:
    """The cluster, or None when it does not exist."""
    try:
        cluster: dict[str, Any] = eks.describe_cluster(name=name)["cluster"]
        return cluster
    except Exception as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        raise translate(exc, f"describe EKS cluster {name}") from exc


def ensure_cluster(
    eks: Any,
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
    existing = describe(eks, name)
    if existing is not None:
        if existing.get("status") in ("FAILED", "DELETING"):
            raise ProviderError(
                f"EKS cluster {name} is {existing['status']}.",
                hint="Delete it (cluster_delete) and create the cluster again.",
            )
        return existing
    try:
        cluster: dict[str, Any] = eks.create_cluster(
            name=name,
            version=version,
            roleArn=role_arn,
            resourcesVpcConfig={
                "subnetIds": subnet_ids,
                "securityGroupIds": [security_group_id],
                "endpointPrivateAccess": True,
                **endpoint_access(public_access_cidrs),
            },
            accessConfig={"authenticationMode": AUTH_MODE, "bootstrapClusterCreatorAdminPermissions": True},
            tags=tag_map(cluster_tag, operation_id),
            clientRequestToken=f"{operation_id}-eks",
        )["cluster"]
    except Exception as exc:
        error = translate(exc, f"create EKS cluster {name}")
        if error_code(exc) == "UnsupportedAvailabilityZoneException":
            raise CapacityUnavailable(error.message) from exc
        raise error from exc
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


def ensure_admin_access(eks: Any, *, name: str, principal_arn: str) -> None:
    """An access entry for the control plane's principal with the cluster-admin access policy."""
    try:
        entries = eks.list_access_entries(clusterName=name).get("accessEntries", [])
        if principal_arn not in entries:
            try:
                eks.create_access_entry(clusterName=name, principalArn=principal_arn, type="STANDARD")
            except Exception as exc:
                if error_code(exc) != "ResourceInUseException":
                    raise
        policies = eks.list_associated_access_policies(clusterName=name, principalArn=principal_arn)
        if not any(p["policyArn"] == ADMIN_POLICY for p in policies.get("associatedAccessPolicies", [])):
            eks.associate_access_policy(
                clusterName=name, principalArn=principal_arn, policyArn=ADMIN_POLICY, accessScope={"type": "cluster"}
            )
    except InstantStartError:
        raise
    except Exception as exc:
        raise translate(exc, f"grant the control plane access to {name}") from exc
