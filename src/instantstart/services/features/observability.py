"""Observability: an Amazon Managed Service for Prometheus workspace and the collector's remote-write policy."""

from __future__ import annotations

import time
from typing import Any

from instantstart.aws import amp as amp_api
from instantstart.errors import DependencyFailed
from instantstart.services.core.ledger import mark_gone, record, tag_map
from instantstart.services.features.identity import Where

WAIT_SECONDS = 300
SCRAPE_SECONDS = 30
# The add-on's metrics categories and the levels its documented defaults give them.
METRICS_LEVELS = {
    "trainingMetrics": "BASIC", "inferenceMetrics": "BASIC", "taskGovernanceMetrics": "DISABLED",
    "scalingMetrics": "DISABLED", "customMetrics": "BASIC", "nodeMetrics": "BASIC",
    "acceleratedComputeMetrics": "BASIC", "networkMetrics": "DISABLED",
}


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


def addon_values(workspace: dict[str, Any], logging: bool) -> dict[str, Any]:
    """The observability add-on's configurationValues: the AMP workspace it remote-writes to (ARN and
    Prometheus endpoint), every metrics category at its documented default level, CloudWatch logging."""
    return {
        "ampWorkspace": {"arn": str(workspace["arn"]), "prometheusEndpoint": str(workspace["prometheusEndpoint"])},
        "metricsProvider": {name: {"level": level, "scrapeInterval": SCRAPE_SECONDS}
                            for name, level in METRICS_LEVELS.items()},
        "logging": {"enabled": logging},
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
    """The collector's permissions as the HyperPod observability docs list them: aps:RemoteWrite on exactly
    this workspace, and CloudWatch Logs on the /aws/sagemaker/Clusters/* log groups of the same account and
    Region (read from the workspace ARN)."""
    partition, region, account = workspace_arn.split(":")[1], workspace_arn.split(":")[3], workspace_arn.split(":")[4]
    groups = f"arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "RemoteWrite", "Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": [workspace_arn]},
            {
                "Sid": "ClusterLogs",
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogGroups",
                           "logs:DescribeLogStreams", "logs:PutLogEvents", "logs:GetLogEvents",
                           "logs:FilterLogEvents", "logs:GetLogRecord", "logs:StartQuery", "logs:StopQuery",
                           "logs:GetQueryResults"],
                "Resource": [groups, f"{groups}:log-stream:*"],
            },
        ],
    }


def fsx_csi_policy() -> dict[str, Any]:
    """What the FSx for Lustre CSI driver's controller needs, as its installation guide lists it (a narrower
    alternative to the AmazonFSxFullAccess managed policy the EKS guide attaches): create, describe, update,
    tag and delete file systems; s3:ListBucket for S3-linked file systems; create the FSx service-linked role
    (condition on the service name) and manage the S3 data-repository service-linked role."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "FsxDataRepositoryServiceLinkedRole",
                "Effect": "Allow",
                "Action": ["iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
                "Resource": "arn:aws:iam::*:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*",
            },
            {
                "Sid": "FsxServiceLinkedRole",
                "Effect": "Allow",
                "Action": "iam:CreateServiceLinkedRole",
                "Resource": "*",
                "Condition": {"StringLike": {"iam:AWSServiceName": ["fsx.amazonaws.com"]}},
            },
            {
                "Sid": "FsxFileSystems",
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "fsx:CreateFileSystem", "fsx:DeleteFileSystem", "fsx:DescribeFileSystems",
                           "fsx:TagResource", "fsx:UpdateFileSystem"],
                "Resource": ["*"],
            },
        ],
    }
