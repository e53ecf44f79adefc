"""EKS calls: clusters, access entries, add-ons, node groups, pod identity associations (blocking, translated)."""

from __future__ import annotations

from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, call_or_none, error_code, translate
from instantstart.aws.paging import collect
from instantstart.errors import CapacityUnavailable

ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def describe_cluster(aws: AwsClients, region: str, name: str) -> dict[str, Any] | None:
    """DescribeCluster's `cluster`, or None when it does not exist."""
    return call_or_none(f"describe EKS cluster {name}", aws.eks(region).describe_cluster, "cluster", name=name)


def create_cluster(aws: AwsClients, region: str, request: dict[str, Any]) -> dict[str, Any]:
    """CreateCluster; an Availability Zone EKS cannot use is CapacityUnavailable."""
    name = request.get("name", "")
    try:
        return cast("dict[str, Any]", aws.eks(region).create_cluster(**request)["cluster"])
    except Exception as exc:
        error = translate(exc, f"create EKS cluster {name}")
        if error_code(exc) == "UnsupportedAvailabilityZoneException":
            raise CapacityUnavailable(error.message) from exc
        raise error from exc


def delete_cluster(aws: AwsClients, region: str, name: str) -> None:
    """Delete the cluster's add-ons, then DeleteCluster (asynchronous)."""
    eks = aws.eks(region)
    for addon in list_addons(aws, region, name):
        call(f"delete add-on {addon}", eks.delete_addon, clusterName=name, addonName=addon)
    call(f"delete EKS cluster {name}", eks.delete_cluster, name=name)


def update_cluster_version(aws: AwsClients, region: str, name: str, version: str, token: str) -> dict[str, Any]:
    """UpdateClusterVersion to `version` (EKS takes one minor version at a time); the `update`. The same
    `token` returns the same update, so a retry after a crash does not start a second one."""
    found = call(f"update EKS cluster {name} to Kubernetes {version}", aws.eks(region).update_cluster_version,
                 name=name, version=version, clientRequestToken=token)
    return cast("dict[str, Any]", found["update"])


def describe_update(aws: AwsClients, region: str, name: str, update_id: str) -> dict[str, Any]:
    """DescribeUpdate of a cluster update (status InProgress, Successful, Failed or Cancelled; errors)."""
    found = call(f"describe update {update_id} of {name}", aws.eks(region).describe_update, name=name,
                 updateId=update_id)
    return cast("dict[str, Any]", found["update"])


def ensure_admin_access(aws: AwsClients, region: str, *, name: str, principal_arn: str) -> None:
    """An access entry for `principal_arn` with the cluster-admin access policy (idempotent)."""
    eks = aws.eks(region)
    action = f"grant the control plane access to {name}"
    entries = collect(action, eks, "list_access_entries", "accessEntries", clusterName=name)
    if principal_arn not in entries:
        try:
            eks.create_access_entry(clusterName=name, principalArn=principal_arn, type="STANDARD")
        except Exception as exc:
            if error_code(exc) != "ResourceInUseException":
                raise translate(exc, action) from exc
    policies = collect(action, eks, "list_associated_access_policies", "associatedAccessPolicies",
                       clusterName=name, principalArn=principal_arn)
    if not any(p["policyArn"] == ADMIN_POLICY for p in policies):
        call(
            action,
            eks.associate_access_policy,
            clusterName=name,
            principalArn=principal_arn,
            policyArn=ADMIN_POLICY,
            accessScope={"type": "cluster"},
        )


# -- add-ons ------------------------------------------------------------------------------------------------


def list_addons(aws: AwsClients, region: str, cluster: str) -> list[str]:
    """Names of the cluster's add-ons."""
    return [str(a) for a in collect(f"list add-ons of {cluster}", aws.eks(region), "list_addons", "addons",
                                    clusterName=cluster)]


def describe_addon(aws: AwsClients, region: str, cluster: str, name: str) -> dict[str, Any] | None:
    """DescribeAddon's `addon`, or None when it is not installed."""
    return call_or_none(f"describe add-on {name}", aws.eks(region).describe_addon, "addon", clusterName=cluster,
                        addonName=name)


def addon_versions(aws: AwsClients, region: str, name: str, kubernetes_version: str) -> list[dict[str, Any]]:
    """DescribeAddonVersions: the versions of add-on `name` offered for a Kubernetes version."""
    eks = aws.eks(region)
    found = call(
        f"list versions of add-on {name}",
        eks.describe_addon_versions,
        addonName=name,
        kubernetesVersion=kubernetes_version,
    )
    return [cast("dict[str, Any]", v) for a in found.get("addons", []) for v in a.get("addonVersions", [])]


def create_addon(aws: AwsClients, region: str, request: dict[str, Any]) -> None:
    """CreateAddon; one that exists already (ResourceInUseException) is fine."""
    try:
        aws.eks(region).create_addon(**request)
    except Exception as exc:
        if error_code(exc) != "ResourceInUseException":
            raise translate(exc, f"create add-on {request.get('addonName')}") from exc


def update_addon(aws: AwsClients, region: str, request: dict[str, Any]) -> str | None:
    """UpdateAddon; the update id."""
    update = call(f"update add-on {request.get('addonName')}", aws.eks(region).update_addon, **request)
    return update.get("update", {}).get("id")


def delete_addon(aws: AwsClients, region: str, cluster: str, name: str) -> None:
    """DeleteAddon (asynchronous)."""
    call(f"delete add-on {name}", aws.eks(region).delete_addon, clusterName=cluster, addonName=name)


# -- pod identity ---------------------------------------------------------------------------------------------


def find_pod_identity_association(
    aws: AwsClients, region: str, cluster: str, namespace: str, service_account: str
) -> tuple[str, str | None] | None:
    """(association id, role ARN) of namespace/serviceAccount's association, or None."""
    eks = aws.eks(region)
    action = f"find the pod identity association for {namespace}/{service_account}"
    found = collect(action, eks, "list_pod_identity_associations", "associations",
                    clusterName=cluster, namespace=namespace, serviceAccount=service_account)
    if not found:
        return None
    aid = str(found[0]["associationId"])
    current = call(action, eks.describe_pod_identity_association, clusterName=cluster, associationId=aid)
    return aid, current["association"].get("roleArn")


def set_pod_identity_role(aws: AwsClients, region: str, cluster: str, association_id: str, role_arn: str) -> None:
    """Point an existing pod identity association at `role_arn`."""
    eks = aws.eks(region)
    call(
        f"update pod identity association {association_id}",
        eks.update_pod_identity_association,
        clusterName=cluster,
        associationId=association_id,
        roleArn=role_arn,
    )


def create_pod_identity_association(
    aws: AwsClients,
    region: str,
    *,
    cluster: str,
    namespace: str,
    service_account: str,
    role_arn: str,
    tags: dict[str, str],
) -> str:
    """CreatePodIdentityAssociation; its id."""
    created = call(
        f"create the pod identity association for {namespace}/{service_account}",
        aws.eks(region).create_pod_identity_association,
        clusterName=cluster,
        namespace=namespace,
        serviceAccount=service_account,
        roleArn=role_arn,
        tags=tags,
    )["association"]
    return str(created["associationId"])


def delete_pod_identity_association(aws: AwsClients, region: str, cluster: str, association_id: str) -> None:
    """DeletePodIdentityAssociation."""
    call(
        f"delete pod identity association {association_id}",
        aws.eks(region).delete_pod_identity_association,
        clusterName=cluster,
        associationId=association_id,
    )


# -- managed node groups ------------------------------------------------------------------------------------


def list_nodegroups(aws: AwsClients, region: str, cluster: str) -> list[str]:
    """Names of the cluster's managed node groups."""
    return [str(n) for n in collect(f"list node groups of {cluster}", aws.eks(region), "list_nodegroups",
                                    "nodegroups", clusterName=cluster)]


def describe_nodegroup(aws: AwsClients, region: str, cluster: str, name: str) -> dict[str, Any] | None:
    """DescribeNodegroup's `nodegroup`, or None when it does not exist."""
    return call_or_none(f"describe node group {name}", aws.eks(region).describe_nodegroup, "nodegroup",
                        clusterName=cluster, nodegroupName=name)


def scale_nodegroup(aws: AwsClients, region: str, cluster: str, name: str, scaling: dict[str, int]) -> None:
    """UpdateNodegroupConfig with a new scalingConfig."""
    eks = aws.eks(region)
    call(
        f"scale node group {name}",
        eks.update_nodegroup_config,
        clusterName=cluster,
        nodegroupName=name,
        scalingConfig=cast(Any, scaling),
    )


def delete_nodegroup(aws: AwsClients, region: str, cluster: str, name: str) -> None:
    """DeleteNodegroup (asynchronous)."""
    call(f"delete node group {name}", aws.eks(region).delete_nodegroup, clusterName=cluster, nodegroupName=name)
