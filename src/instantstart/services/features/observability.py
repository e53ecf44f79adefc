"""Observability: an Amazon Managed Service for Prometheus workspace and the collector's remote-write policy."""

from __future__ import annotations

import time
from typing import Any

from instantstart.aws import amp as amp_api
from instantstart.errors import DependencyFailed
from instantstart.services.core.ledger import mark_gone, record, tag_map
from instantstart.services.features.identity import Where

WAIT_SECONDS = 300


def alias(tag: str) -> str:
    """The workspace alias InstantStart uses for a cluster."""
    return f"instantstart-{tag}"


def urls(workspace: dict[str, Any]) -> dict[str, Any]:
    """A workspace's id, ARN, status and its remote-write and query URLs."""
    endpoint = str(workspace.get("prometheusEndpoint") or "")
    if endpoint and not endpoint.endswith("/"):
        endpoint += "/"
    return {
        "workspaceId": workspace.get("workspaceId"),
        "workspaceArn": workspace.get("arn"),
        "status": (workspace.get("status") or {}).get("statusCode"),
        "remoteWriteUrl": f"{endpoint}api/v1/remote_write" if endpoint else None,
        "queryUrl": f"{endpoint}api/v1/query" if endpoint else None,
    }


def ensure_workspace(where: Where, poll_seconds: float) -> tuple[dict[str, Any], bool]:
    """The cluster's workspace, reused when one with its alias exists, else created (ledgered) and waited
    for ACTIVE; (workspace, created)."""
    found = amp_api.find_workspace(where.aws, where.region, alias(where.tag))
    created = False
    if found is None:
        tags = tag_map(where.tag, where.operation_id)
        wid = amp_api.create_workspace(where.aws, where.region, alias(where.tag), tags)
        record(where.db, cluster_tag=where.tag, operation_id=where.operation_id, resource_type="aps:workspace",
               resource_id=wid, region=where.region)
        created = True
        found = amp_api.describe_workspace(where.aws, where.region, wid)
    deadline = time.monotonic() + WAIT_SECONDS
    while found is not None and (found.get("status") or {}).get("statusCode") == "CREATING":
        if time.monotonic() > deadline:
            raise DependencyFailed(f"AMP workspace {alias(where.tag)} stayed CREATING.", retryable=True,
                                   hint="Check the workspace in the AMP console, then operation_retry.")
        time.sleep(poll_seconds)
        found = amp_api.describe_workspace(where.aws, where.region, str(found["workspaceId"]))
    if found is None or (found.get("status") or {}).get("statusCode") != "ACTIVE":
        raise DependencyFailed(
            f"AMP workspace {alias(where.tag)} is {(found or {}).get('status') or 'gone'}.",
            hint="Delete the failed workspace, then enable observability again.",
        )
    return found, created


def remove_workspace(where: Where) -> bool:
    """Delete the cluster's workspace (none: False)."""
    found = amp_api.find_workspace(where.aws, where.region, alias(where.tag))
    if found is None:
        return False
    amp_api.delete_workspace(where.aws, where.region, str(found["workspaceId"]))
    mark_gone(where.db, resource_type="aps:workspace", resource_id=str(found["workspaceId"]), region=where.region)
    return True


def remote_write_policy(workspace_arn: str) -> dict[str, Any]:
    """aps:RemoteWrite on exactly this workspace."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "RemoteWrite", "Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": [workspace_arn]}
        ],
    }


def fsx_csi_policy() -> dict[str, Any]:
    """What the FSx for Lustre CSI driver's controller calls: file systems, their tags, the FSx service-linked
    role, and network lookups for the file system's ENIs."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "FsxFileSystems",
                "Effect": "Allow",
                "Action": ["fsx:CreateFileSystem", "fsx:DeleteFileSystem", "fsx:DescribeFileSystems",
                           "fsx:UpdateFileSystem", "fsx:TagResource"],
                "Resource": "*",
            },
            {
                "Sid": "FsxServiceLinkedRole",
                "Effect": "Allow",
                "Action": ["iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
                "Resource": "arn:aws:iam::*:role/aws-service-role/fsx.amazonaws.com/*",
            },
            {
                "Sid": "FsxNetwork",
                "Effect": "Allow",
                "Action": ["ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeNetworkInterfaces"],
                "Resource": "*",
            },
        ],
    }
