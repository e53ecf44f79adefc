"""The lifecycle script nodes run as root: uploaded under the cluster's lifecycle prefix (no data role can write
there) and its SHA-256 verified before every CreateCluster/UpdateCluster."""

from __future__ import annotations

import hashlib
from typing import Any

from instantstart.aws import identity, s3
from instantstart.aws.clients import AwsClients
from instantstart.errors import Conflict
from instantstart.manifests import iam_policies as pol
from instantstart.manifests.hyperpod import LIFECYCLE_SCRIPT

ON_CREATE = "on_create.sh"
EXPECTED_SHA256 = hashlib.sha256(LIFECYCLE_SCRIPT.encode()).hexdigest()


def lifecycle_uri(bucket: str, cluster_tag: str) -> str:
    """The SourceS3Uri of the cluster's instance groups."""
    return f"s3://{bucket}/{pol.lifecycle_prefix(cluster_tag)}"


def lifecycle_key(cluster_tag: str) -> str:
    """The key of the cluster's on_create.sh."""
    return f"{pol.lifecycle_prefix(cluster_tag)}{ON_CREATE}"


def ensure_lifecycle(aws: AwsClients, region: str, bucket: str, cluster_tag: str) -> str:
    """Upload on_create.sh when absent, then verify its SHA-256 (before CreateCluster or UpdateCluster). A script
    changed by anyone else is refused, never run. Returns the lifecycle URI."""
    account = identity.account_id(aws, region)
    key = lifecycle_key(cluster_tag)
    found = s3.object_sha256(aws, region, bucket, key, account)
    if found is None:
        s3.put_object(aws, region, bucket, key, LIFECYCLE_SCRIPT.encode(), "text/x-shellscript", account)
        found = s3.object_sha256(aws, region, bucket, key, account)
    if found != EXPECTED_SHA256:
        raise Conflict(
            f"The lifecycle script s3://{bucket}/{key} was modified (sha256 {found}, expected {EXPECTED_SHA256}); "
            "nodes would run it as root, so no node is added or created.",
            hint=f"Inspect and delete s3://{bucket}/{key}; the next operation uploads InstantStart's script again.",
            details={"bucket": bucket, "key": key, "sha256": found, "expected": EXPECTED_SHA256},
        )
    return lifecycle_uri(bucket, cluster_tag)


def verify_groups(aws: AwsClients, region: str, groups: list[dict[str, Any]]) -> None:
    """Verify the on_create.sh of every group's SourceS3Uri (before an UpdateCluster that launches nodes)."""
    account = identity.account_id(aws, region)
    for group in groups:
        config: dict[str, Any] = group.get("LifeCycleConfig") or {}
        uri = str(config.get("SourceS3Uri", ""))
        if not uri.startswith("s3://"):
            continue
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        key = f"{prefix.rstrip('/')}/{config.get('OnCreate') or ON_CREATE}".lstrip("/")
        found = s3.object_sha256(aws, region, bucket, key, account)
        if found != EXPECTED_SHA256:
            raise Conflict(
                f"The lifecycle script s3://{bucket}/{key} of instance group {group.get('InstanceGroupName')} "
                f"does not match InstantStart's (sha256 {found}); nodes would run it as root.",
                hint=f"Inspect s3://{bucket}/{key}; restore InstantStart's script or re-create the group.",
                details={"bucket": bucket, "key": key, "sha256": found, "expected": EXPECTED_SHA256},
            )
