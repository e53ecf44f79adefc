"""IAM for claims on buckets other than the project bucket: the S3 CSI role reaches exactly the bucket/prefix of
each such claim, widened when one is made and narrowed again when the last claim on it goes."""

from __future__ import annotations

from typing import Any

from instantstart.aws import iam as iam_api
from instantstart.aws import identity
from instantstart.context import AppContext
from instantstart.manifests import iam_policies as pol
from instantstart.services.base.facts import facts_of
from instantstart.store.models import ClusterRow

CSI_ROLE = "s3-csi"  # the role suffix of the Mountpoint for S3 CSI driver (data/dependencies.yaml)


def csi_role_name(tag: str) -> str:
    """The Mountpoint for S3 CSI driver's Pod Identity role of cluster `tag`."""
    return f"instantstart-{tag}-{CSI_ROLE}"


def sync_csi_role(app: AppContext, row: ClusterRow, storage: dict[str, Any]) -> str | None:
    """Rewrite the S3 CSI role's policy to the cluster's data prefix plus the bucket/prefix of every claim in
    `storage` (claim name → recorded {bucketName, prefix}) on another bucket. The role's name when its policy
    changed; None when it already matched or the role does not exist yet (cluster_configure_dependencies then
    writes the same policy from the recorded claims). Blocking."""
    project = facts_of(row).bucket
    if not project:
        return None
    name = csi_role_name(row.tag)
    if iam_api.get_role(app.aws, row.region, name) is None:
        return None
    scope = pol.Scope(identity.account_id(app.aws, row.region), row.region, row.tag, row.eks_cluster_name, project)
    policy = pol.csi_data_policy(scope, pol.claim_grants(project, storage))
    if iam_api.inline_policy(app.aws, row.region, name) == policy:
        return None
    iam_api.put_inline_policy(app.aws, row.region, name, policy)
    return name


def widen_csi_role(app: AppContext, row: ClusterRow, claim: str, spec: dict[str, Any]) -> str | None:
    """When the claim's bucket is not the project bucket, add its bucket/prefix to the S3 CSI role's policy
    (with every other recorded claim's). The role's name when it was rewritten, else None. Blocking."""
    facts = facts_of(row)
    if spec["bucketName"] == facts.bucket:
        return None
    storage = {**facts.storage, claim: {"bucketName": spec["bucketName"], "prefix": spec["prefix"]}}
    return sync_csi_role(app, row, storage)


def narrow_csi_role(app: AppContext, row: ClusterRow, remaining: dict[str, Any]) -> str | None:
    """After a claim is deleted: the S3 CSI role keeps only the grants the `remaining` recorded claims need
    (another claim on the same bucket/prefix keeps it). The role's name when it was rewritten, else None."""
    return sync_csi_role(app, row, remaining)
