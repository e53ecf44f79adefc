"""IAM for claims on buckets other than the project bucket: the S3 CSI role gets exactly that bucket/prefix."""

from __future__ import annotations

from typing import Any

from instantstart.aws import iam as iam_api
from instantstart.aws import identity
from instantstart.context import AppContext
from instantstart.manifests import iam_policies as pol
from instantstart.store.models import ClusterRow

CSI_ROLE = "s3-csi"  # the role suffix of the Mountpoint for S3 CSI driver (data/dependencies.yaml)


def widen_csi_role(app: AppContext, row: ClusterRow, claim: str, spec: dict[str, Any]) -> str | None:
    """When the claim's bucket is not the project bucket, rewrite the S3 CSI role's policy to the cluster's data
    prefix plus every such claim's bucket/prefix (this one included). The role's name when it was rewritten;
    None when nothing was needed or the role does not exist yet (cluster_configure_dependencies then writes the
    same policy from the recorded claims). Blocking."""
    details = dict(row.details or {})
    project = details.get("bucket")
    if not project or spec["bucketName"] == project:
        return None
    name = f"instantstart-{row.tag}-{CSI_ROLE}"
    if iam_api.get_role(app.aws, row.region, name) is None:
        return None
    storage = {**(details.get("storage") or {}), claim: {"bucketName": spec["bucketName"], "prefix": spec["prefix"]}}
    scope = pol.Scope(identity.account_id(app.aws, row.region), row.region, row.tag, row.eks_cluster_name, project)
    policy = pol.csi_data_policy(scope, pol.claim_grants({**details, "storage": storage}))
    if iam_api.inline_policy(app.aws, row.region, name) != policy:
        iam_api.put_inline_policy(app.aws, row.region, name, policy)
    return name
