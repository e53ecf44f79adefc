"""Observability: an Amazon Managed Service for Prometheus workspace and the collector's remote-write policy."""

from __future__ import annotations

import time
from typing import Any

from instantstart.aws import amp as amp_api
from instantstart.errors import DependencyFailed
from instantstart.services.base.observability import alias
from instantstart.services.base.workload_identity import Where
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import mark_gone, record, tag_map

WAIT_SECONDS = 300
SCRAPE_SECONDS = 30
# The add-on's metrics categories and the levels its documented defaults give them.
METRICS_LEVELS = {
    "trainingMetrics": "BASIC", "inferenceMetrics": "BASIC", "taskGovernanceMetrics": "DISABLED",
    "scalingMetrics": "DISABLED", "customMetrics": "BASIC", "nodeMetrics": "BASIC",
    "acceleratedComputeMetrics": "BASIC", "networkMetrics": "DISABLED",
}


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
        tags = tag_map(where.tag, where.operation_id, installation_id(where.db))
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
