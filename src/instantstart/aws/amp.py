"""Amazon Managed Service for Prometheus calls: workspaces by alias (blocking, errors translated)."""

from __future__ import annotations

from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, call_gone_ok, call_or_none
from instantstart.aws.paging import collect


def find_workspace(aws: AwsClients, region: str, alias: str) -> dict[str, Any] | None:
    """The first workspace (not being deleted) whose alias is `alias`, described; None when there is none."""
    amp = aws.amp(region)
    found = collect(f"list AMP workspaces with alias {alias}", amp, "list_workspaces", "workspaces", alias=alias)
    for summary in found:
        if summary.get("alias") == alias and summary["status"]["statusCode"] != "DELETING":
            return describe_workspace(aws, region, str(summary["workspaceId"]))
    return None


def describe_workspace(aws: AwsClients, region: str, workspace_id: str) -> dict[str, Any] | None:
    """DescribeWorkspace's `workspace`, or None when it does not exist."""
    return call_or_none(f"describe AMP workspace {workspace_id}", aws.amp(region).describe_workspace, "workspace",
                        workspaceId=workspace_id)


def create_workspace(aws: AwsClients, region: str, alias: str, tags: dict[str, str]) -> str:
    """CreateWorkspace; its id."""
    answer = call(f"create AMP workspace {alias}", aws.amp(region).create_workspace, alias=alias, tags=tags)
    return str(answer["workspaceId"])


def delete_workspace(aws: AwsClients, region: str, workspace_id: str) -> None:
    """DeleteWorkspace (a workspace already gone is success)."""
    call_gone_ok(f"delete AMP workspace {workspace_id}", aws.amp(region).delete_workspace, workspaceId=workspace_id)
