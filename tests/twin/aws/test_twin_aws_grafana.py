"""The twin's Amazon Managed Grafana workspaces (moto has none): input checked against the botocore model and the
API reference's rules, CREATING → ACTIVE and DELETING → gone on the twin clock, clientToken idempotency, listing
with tags and pages, tags by ARN, and the grafana_failure fault ending a creation CREATION_FAILED."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.aws.grafana import CREATE_SECONDS, DELETE_SECONDS
from hyperpod_twin.twin import Twin
from tests.support.twin_aws import advance, control

TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "grafana.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


@pytest.fixture(scope="module")
def role(twin: Twin) -> str:
    """A role the workspaces use."""
    iam: Any = twin.boto3_client("iam")
    arn: str = iam.create_role(RoleName="grafana-ws", AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"]
    return arn


def create(grafana: Any, role: str, **extra: Any) -> dict[str, Any]:
    """CreateWorkspace as the control plane sends it."""
    workspace: dict[str, Any] = grafana.create_workspace(
        accountAccessType="CURRENT_ACCOUNT", permissionType="CUSTOMER_MANAGED", authenticationProviders=["AWS_SSO"],
        workspaceRoleArn=role, **extra)["workspace"]
    return workspace


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def test_workspace_lifecycle_tags_and_listing(twin: Twin, role: str) -> None:
    grafana: Any = twin.boto3_client("grafana")
    with pytest.raises(ClientError) as bad_enum:
        grafana.create_workspace(accountAccessType="CURRENT_ACCOUNT", permissionType="SELF",
                                 authenticationProviders=["AWS_SSO"])
    assert code(bad_enum) == "ValidationException" and "permissionType" in str(bad_enum.value)
    with pytest.raises(ClientError, match="workspaceRoleArn is required"):
        grafana.create_workspace(accountAccessType="CURRENT_ACCOUNT", permissionType="CUSTOMER_MANAGED",
                                 authenticationProviders=["AWS_SSO"])
    with pytest.raises(ClientError, match="does not exist"):
        create(grafana, role.replace("grafana-ws", "nobody"))
    made = create(grafana, role, workspaceName="dash", tags={"instantstart:cluster-tag": "t1"}, clientToken="tok-1")
    wid = made["id"]
    assert made["status"] == "CREATING" and made["endpoint"] == f"{wid}.grafana-workspace.us-west-2.amazonaws.com"
    assert create(grafana, role, clientToken="tok-1")["id"] == wid  # the same token is the same workspace
    advance(twin, CREATE_SECONDS - 5)
    assert grafana.describe_workspace(workspaceId=wid)["workspace"]["status"] == "CREATING"
    advance(twin, 10)
    described = grafana.describe_workspace(workspaceId=wid)["workspace"]
    assert described["status"] == "ACTIVE" and described["authentication"]["providers"] == ["AWS_SSO"]
    assert described["workspaceRoleArn"] == role and described["name"] == "dash"
    second = create(grafana, role)
    first_page = grafana.list_workspaces(maxResults=1)
    assert len(first_page["workspaces"]) == 1 and first_page["nextToken"]
    listed = grafana.get_paginator("list_workspaces").paginate(PaginationConfig={"PageSize": 1}).build_full_result()
    assert {w["id"]: w.get("tags") for w in listed["workspaces"]} == {wid: {"instantstart:cluster-tag": "t1"},
                                                                       second["id"]: {}}
    arn = f"arn:aws:grafana:us-west-2:{twin.account_id}:/workspaces/{wid}"
    grafana.tag_resource(resourceArn=arn, tags={"team": "ml"})
    assert grafana.list_tags_for_resource(resourceArn=arn)["tags"] == {"instantstart:cluster-tag": "t1", "team": "ml"}
    grafana.untag_resource(resourceArn=arn, tagKeys=["team"])
    assert grafana.list_tags_for_resource(resourceArn=arn)["tags"] == {"instantstart:cluster-tag": "t1"}
    assert grafana.delete_workspace(workspaceId=wid)["workspace"]["status"] == "DELETING"
    advance(twin, DELETE_SECONDS + 1)
    with pytest.raises(ClientError) as gone:
        grafana.describe_workspace(workspaceId=wid)
    assert code(gone) == "ResourceNotFoundException"
    assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as malformed:
        grafana.describe_workspace(workspaceId="ws-1")
    assert code(malformed) == "ValidationException"  # the model's pattern g-[0-9a-f]{10}


def test_grafana_failure_fault_ends_the_next_creation_failed(twin: Twin, role: str) -> None:
    grafana: Any = twin.boto3_client("grafana")
    control(twin, "faults", {"kind": "grafana_failure", "count": 1})
    failed = create(grafana, role)["id"]
    fine = create(grafana, role)["id"]
    advance(twin, CREATE_SECONDS + 1)
    assert grafana.describe_workspace(workspaceId=failed)["workspace"]["status"] == "CREATION_FAILED"
    assert grafana.describe_workspace(workspaceId=fine)["workspace"]["status"] == "ACTIVE"
