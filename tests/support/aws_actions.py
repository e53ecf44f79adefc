"""Which IAM actions the control plane needed in this test session, from the twin's call log.

tests/conftest.py points HYPERPOD_TWIN_CALL_LOG at a file for the whole session before any twin starts,
so every twin (in-process fixtures, `serve --twin` children) appends `service operation agent` lines.
Only calls whose User-Agent ends in `instantstart/<version>` are the control plane's (tests' own boto3
clients are left out). Each API operation maps to the IAM actions it needs, including the ones AWS
checks without a separate call (iam:PassRole, tagging on create, HyperPod's service-linked role).
"""

from __future__ import annotations

from pathlib import Path

IAM_PREFIX = {"service-quotas": "servicequotas", "resourcegroupstaggingapi": "tag", "elbv2": "elasticloadbalancing",
              "elb": "elasticloadbalancing", "amp": "aps", "sagemaker-runtime": "sagemaker"}

# API operation -> IAM action where the names differ (S3 names its actions after resources).
RENAMED = {
    "s3:ListObjectsV2": "s3:ListBucket",
    "s3:ListObjects": "s3:ListBucket",
    "s3:HeadBucket": "s3:ListBucket",
    "s3:HeadObject": "s3:GetObject",
    "s3:DeleteObjects": "s3:DeleteObject",
    "s3:PutBucketEncryption": "s3:PutEncryptionConfiguration",
    "s3:GetBucketEncryption": "s3:GetEncryptionConfiguration",
    "s3:PutBucketPublicAccessBlock": "s3:PutBucketPublicAccessBlock",
    "s3:ListBuckets": "s3:ListAllMyBuckets",
}

# Actions AWS authorizes as part of another call (documented per service).
IMPLIED = {
    "eks:CreateCluster": ["iam:PassRole", "eks:TagResource"],
    "eks:CreatePodIdentityAssociation": ["iam:PassRole", "eks:TagResource"],
    "eks:CreateNodegroup": ["iam:PassRole", "eks:TagResource"],
    "eks:CreateAddon": ["eks:TagResource"],
    "sagemaker:CreateCluster": ["iam:PassRole", "sagemaker:AddTags", "iam:CreateServiceLinkedRole"],
    "sagemaker:UpdateCluster": ["iam:PassRole"],
    "iam:CreateRole": ["iam:TagRole"],
    "iam:CreateOpenIDConnectProvider": ["iam:TagOpenIDConnectProvider"],
    "aps:CreateWorkspace": ["aps:TagResource"],
    "grafana:CreateWorkspace": ["grafana:TagResource", "iam:PassRole"],
    "fsx:CreateFileSystem": ["fsx:TagResource", "iam:CreateServiceLinkedRole"],
}

# Needs no permission (IAM cannot deny it), so the policy need not grant it.
UNGATED = {"sts:GetCallerIdentity"}


def actions_of(service: str, operation: str) -> set[str]:
    """The IAM actions one API call needs."""
    action = f"{IAM_PREFIX.get(service, service)}:{operation}"
    action = RENAMED.get(action, action)
    needed = {action, *IMPLIED.get(action, [])}
    if service == "ec2" and (operation.startswith("Create") or operation == "AllocateAddress"):
        needed.add("ec2:CreateTags")  # TagSpecifications on create are authorized as ec2:CreateTags
    return needed - UNGATED


def recorded_actions(log: Path) -> tuple[set[str], set[str]]:
    """(IAM actions the control plane needed, the raw `service:Operation` calls) from a call log."""
    calls: set[str] = set()
    actions: set[str] = set()
    if not log.exists():
        return actions, calls
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith("instantstart/") or parts[1] == "?":
            continue
        calls.add(f"{parts[0]}:{parts[1]}")
        actions |= actions_of(parts[0], parts[1])
    return actions, calls
