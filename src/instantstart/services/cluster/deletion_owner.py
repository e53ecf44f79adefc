"""Before deleting a ledgered EKS or HyperPod cluster or IAM OIDC provider: the one found under that name must
still be ours (no other installation's id, no other cluster tag), else the deletion stops with CONFLICT."""

from __future__ import annotations

from typing import Any

from instantstart.aws import eks, hyperpod, iam
from instantstart.context import AppContext
from instantstart.services.core.installation import installation_id, refuse_foreign


def check_eks_cluster(app: AppContext, res: dict[str, Any], cluster_tag: str) -> bool:
    """Refuse to delete an EKS cluster that another installation (or cluster tag) has under this name now;
    whether one exists (none: nothing to delete, and DeleteCluster, allowed only on tagged clusters, is refused)."""
    found = eks.describe_cluster(app.aws, res["region"], res["resourceId"])
    if found is None:
        return False
    tags = {str(k): str(v) for k, v in (found.get("tags") or {}).items()}
    refuse_foreign("EKS cluster", res["resourceId"], tags, cluster_tag, installation_id(app.db))
    return True


def check_hyperpod_cluster(app: AppContext, res: dict[str, Any], cluster_tag: str) -> bool:
    """Refuse to delete a HyperPod cluster that another installation (or cluster tag) has under this name now;
    whether one exists (none: nothing to delete, and DeleteCluster, allowed only on tagged clusters, is refused)."""
    found = hyperpod.describe_cluster(app.aws, res["region"], res["resourceId"])
    if found is None:
        return False
    if found.get("ClusterArn"):
        tags = hyperpod.cluster_tags(app.aws, res["region"], str(found["ClusterArn"]))
        refuse_foreign("HyperPod cluster", res["resourceId"], tags, cluster_tag, installation_id(app.db))
    return True


def delete_oidc_provider(app: AppContext, res: dict[str, Any]) -> bool:
    """Delete a ledgered IAM OIDC provider unless another installation (or cluster tag) has tagged it since: one
    provider serves every role of an issuer, so a foreign tag means someone else relies on it (CONFLICT)."""
    tags = iam.oidc_provider_tags(app.aws, res["region"], res["resourceId"])
    refuse_foreign("IAM OIDC provider", res["resourceId"], tags, res["clusterTag"], installation_id(app.db))
    iam.delete_oidc_provider(app.aws, res["region"], res["resourceId"])
    return True
