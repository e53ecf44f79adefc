"""Amazon Managed Grafana calls: workspaces by id or by tag, create, delete (blocking, errors translated)."""

from __future__ import annotations

from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, call_gone_ok, call_or_none
from instantstart.aws.paging import collect

GONE = ("DELETING",)


def describe_workspace(aws: AwsClients, region: str, workspace_id: str) -> dict[str, Any] | None:
    """DescribeWorkspace's `workspace`, or None when it does not exist."""
    return call_or_none(f"describe Amazon Managed Grafana workspace {workspace_id}",
                        aws.grafana(region).describe_workspace, "workspace", workspaceId=workspace_id)


def find_tagged(aws: AwsClients, region: str, key: str, value: str) -> dict[str, Any] | None:
    """The first workspace (not being deleted) tagged `key`=`value`, described; None when there is none.
    ListWorkspaces' summaries carry the tags, so one paginated list finds it."""
    found = collect(f"list Amazon Managed Grafana workspaces tagged {key}={value}", aws.grafana(region),
                    "list_workspaces", "workspaces")
    for summary in sorted(found, key=lambda s: str(s.get("created"))):
        if (summary.get("tags") or {}).get(key) == value and summary.get("status") not in GONE:
            return describe_workspace(aws, region, str(summary["id"]))
    return None


def create_workspace(aws: AwsClients, region: str, *, name: str, description: str, role_arn: str,
                     tags: dict[str, str], client_token: str) -> dict[str, Any]:
    """CreateWorkspace for this account only, users signing in through IAM Identity Center, permissions managed
    by us through `role_arn` (what the API requires: SERVICE_MANAGED is console-only); the new workspace."""
    answer = call(
        f"create Amazon Managed Grafana workspace {name}", aws.grafana(region).create_workspace,
        accountAccessType="CURRENT_ACCOUNT", authenticationProviders=["AWS_SSO"], permissionType="CUSTOMER_MANAGED",
        workspaceRoleArn=role_arn, workspaceName=name, workspaceDescription=description, tags=tags,
        clientToken=client_token,
    )
    return cast("dict[str, Any]", answer["workspace"])


def delete_workspace(aws: AwsClients, region: str, workspace_id: str) -> None:
    """DeleteWorkspace (a workspace already gone is success)."""
    call_gone_ok(f"delete Amazon Managed Grafana workspace {workspace_id}", aws.grafana(region).delete_workspace,
                 workspaceId=workspace_id)
