"""The lifecycle script nodes run as root: uploaded under the cluster's lifecycle prefix (every role InstantStart
writes denies `lifecycle/` writes) and its SHA-256 verified by one function before every CreateCluster, every
UpdateCluster that launches nodes, UpdateClusterSoftware and BatchReplaceClusterNodes, and on every status read."""

from __future__ import annotations

import hashlib
from typing import Any

from instantstart.aws import identity, s3
from instantstart.aws.clients import AwsClients
from instantstart.errors import Conflict
from instantstart.manifests import iam_policies as pol
from instantstart.manifests.hyperpod import LIFECYCLE_SCRIPT
from instantstart.services.base.facts import ClusterFacts

ON_CREATE = "on_create.sh"
EXPECTED_SHA256 = hashlib.sha256(LIFECYCLE_SCRIPT.encode()).hexdigest()
LAUNCHERS = ("hyperpod_node_replace, hyperpod_add_instance_group, hyperpod_scale_instance_group, "
             "hyperpod_update_software or operation_retry")


def lifecycle_uri(bucket: str, cluster_tag: str) -> str:
    """The SourceS3Uri of the cluster's instance groups."""
    return f"s3://{bucket}/{pol.lifecycle_prefix(cluster_tag)}"


def lifecycle_key(cluster_tag: str) -> str:
    """The key of the cluster's on_create.sh."""
    return f"{pol.lifecycle_prefix(cluster_tag)}{ON_CREATE}"


def group_script(group: dict[str, Any]) -> tuple[str, str] | None:
    """(bucket, key) of the on_create script of an instance group (DescribeCluster shape); None without one."""
    config: dict[str, Any] = group.get("LifeCycleConfig") or {}
    uri = str(config.get("SourceS3Uri", ""))
    if not uri.startswith("s3://"):
        return None
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, f"{prefix.rstrip('/')}/{config.get('OnCreate') or ON_CREATE}".lstrip("/")


def restore_hint(bucket: str, key: str) -> str:
    """How the operator restores InstantStart's script (said wherever a changed script is reported)."""
    return (
        f"Inspect s3://{bucket}/{key} (CloudTrail's S3 data events name who wrote it), then delete it "
        f"(aws s3 rm s3://{bucket}/{key}): the next {LAUNCHERS} uploads InstantStart's script again and verifies "
        "it. Until then every node launch (replacement, auto-recovery, Karpenter scale-up) would run the changed "
        "script as root."
    )


def approved_scripts(facts: ClusterFacts) -> dict[str, str]:
    """The lifecycle scripts an operator uploaded with hyperpod_update_lifecycle_script, as recorded in the
    cluster's facts: `bucket/key` -> the SHA-256 recorded when it was uploaded."""
    return {f"{r['bucket']}/{r['key']}": str(r["sha256"]) for r in facts.lifecycle_scripts.values()}


def script_problem(aws: AwsClients, region: str, bucket: str, key: str, account: str | None = None,
                   expected: str = EXPECTED_SHA256) -> str | None:
    """What is wrong with the lifecycle script at s3://bucket/key (of `account`, default the caller's), as a
    sentence; None when its SHA-256 is `expected` (InstantStart's, or the one recorded when an operator uploaded
    it). THE check: every place that verifies a script calls this (blocking)."""
    found = s3.object_sha256(aws, region, bucket, key, account or identity.account_id(aws, region))
    if found == expected:
        return None
    if found is None:
        return f"The lifecycle script s3://{bucket}/{key} is missing"
    return f"The lifecycle script s3://{bucket}/{key} was modified (sha256 {found}, expected {expected})"


def verify_script(aws: AwsClients, region: str, bucket: str, key: str, *, upload_missing: bool = False,
                  expected: str = EXPECTED_SHA256) -> None:
    """Raise Conflict unless s3://bucket/key has the `expected` SHA-256; a missing InstantStart script is uploaded
    first when `upload_missing` (the operator's way to restore it: delete the changed object). Blocking."""
    account = identity.account_id(aws, region)
    problem = script_problem(aws, region, bucket, key, expected=expected)
    if problem is not None and upload_missing and expected == EXPECTED_SHA256 and problem.endswith("missing"):
        s3.put_object(aws, region, bucket, key, LIFECYCLE_SCRIPT.encode(), "text/x-shellscript", account)
        problem = script_problem(aws, region, bucket, key)
    if problem is not None:
        hint = restore_hint(bucket, key) if expected == EXPECTED_SHA256 else (
            f"s3://{bucket}/{key} is not the script uploaded with hyperpod_update_lifecycle_script (CloudTrail's S3 "
            "data events name who wrote it): run hyperpod_update_lifecycle_script again with the script you want.")
        raise Conflict(
            f"{problem}; nodes would run it as root, so no node is launched.",
            hint=hint,
            details={"bucket": bucket, "key": key, "expected": expected},
        )


def ensure_lifecycle(aws: AwsClients, region: str, bucket: str, cluster_tag: str) -> str:
    """Upload on_create.sh when absent, then verify its SHA-256 (before CreateCluster or UpdateCluster). A script
    changed by anyone else is refused, never run. Returns the lifecycle URI."""
    verify_script(aws, region, bucket, lifecycle_key(cluster_tag), upload_missing=True)
    return lifecycle_uri(bucket, cluster_tag)


def verify_groups(aws: AwsClients, region: str, groups: list[dict[str, Any]], *, only_ours: bool = False,
                  approved: dict[str, str] | None = None) -> None:
    """Verify the on_create.sh of every group's SourceS3Uri (before an UpdateCluster that launches nodes, a
    software update, a node replacement); a missing script under InstantStart's lifecycle prefix is uploaded
    again first. `approved` (approved_scripts of the cluster's facts) holds the SHA-256 of scripts an operator
    uploaded; every other script must be InstantStart's. `only_ours`: skip scripts outside a `lifecycle/` prefix
    (an imported cluster's own scripts, which have no expected checksum here)."""
    for bucket, key in dict.fromkeys(filter(None, map(group_script, groups))):
        ours = key.startswith(pol.LIFECYCLE_ROOT)
        if ours or not only_ours:
            expected = (approved or {}).get(f"{bucket}/{key}", EXPECTED_SHA256)
            verify_script(aws, region, bucket, key, upload_missing=ours, expected=expected)


def lifecycle_problems(aws: AwsClients, region: str, bucket: str | None, cluster_tag: str,
                       groups: list[dict[str, Any]], account: str | None = None,
                       approved: dict[str, str] | None = None) -> list[str]:
    """Attention items of cluster status: each of the cluster's own lifecycle scripts (under its prefix of the
    project bucket) that is not InstantStart's, with the fix. Scripts of imported groups are not ours to judge."""
    if not bucket:
        return []
    own = pol.lifecycle_prefix(cluster_tag)
    mine = [s for s in dict.fromkeys(filter(None, map(group_script, groups))) if s[0] == bucket
            and s[1].startswith(own)]
    problems = []
    for script in mine:
        expected = (approved or {}).get(f"{script[0]}/{script[1]}", EXPECTED_SHA256)
        problem = script_problem(aws, region, *script, account, expected=expected)
        if problem is not None:
            users = ", ".join(str(g.get("InstanceGroupName")) for g in groups if group_script(g) == script)
            problems.append(f"{problem}: instance groups {users} run it as root on every new node. Fix: "
                            f"{restore_hint(*script)}")
    return problems
