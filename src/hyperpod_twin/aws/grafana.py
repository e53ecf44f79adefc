"""Amazon Managed Grafana workspaces (moto has none): Create/Describe/List/Delete and tags, CREATING → ACTIVE and
DELETING → gone on the twin clock; a `grafana_failure` fault ends the next creation CREATION_FAILED."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from .context import AwsContext, hex_id
from .protocol import AwsError, AwsRequest, RawResponse, json_response, page, validation

SERVICE = "grafana"
CREATE_SECONDS = 300.0  # twin seconds from CREATING to ACTIVE (AWS publishes no figure; minutes in practice)
DELETE_SECONDS = 120.0  # twin seconds a workspace stays DELETING before it is gone
GRAFANA_VERSION = "10.4"


@dataclass
class Workspace:
    """One workspace and its lifecycle."""

    id: str
    arn: str
    region: str
    account_access_type: str
    permission_type: str
    providers: list[str]
    created: float
    name: str | None = None
    description: str | None = None
    role_arn: str | None = None
    data_sources: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    client_token: str | None = None
    status: str = "CREATING"
    modified: float = 0.0

    def shape(self) -> dict[str, Any]:
        """DescribeWorkspace's `workspace` (WorkspaceDescription)."""
        out: dict[str, Any] = {
            "id": self.id, "status": self.status, "created": self.created, "modified": self.modified or self.created,
            "endpoint": f"{self.id}.grafana-workspace.{self.region}.amazonaws.com",
            "grafanaVersion": GRAFANA_VERSION, "dataSources": list(self.data_sources),
            "accountAccessType": self.account_access_type, "permissionType": self.permission_type,
            "authentication": {"providers": list(self.providers)}, "tags": dict(self.tags),
        }
        optional = {"name": self.name, "description": self.description, "workspaceRoleArn": self.role_arn}
        out.update({k: v for k, v in optional.items() if v is not None})
        return out

    def summary(self) -> dict[str, Any]:
        """ListWorkspaces' WorkspaceSummary."""
        keep = ("id", "status", "created", "modified", "endpoint", "grafanaVersion", "authentication", "tags",
                "name", "description")
        return {k: v for k, v in self.shape().items() if k in keep}


class GrafanaState:
    """The account's workspaces."""

    def __init__(self) -> None:
        self.workspaces: dict[str, Workspace] = {}

    def reset(self) -> None:
        """Forget every workspace."""
        self.workspaces.clear()

    def find(self, region: str, workspace_id: str) -> Workspace:
        """A workspace of `region` by id, or ResourceNotFoundException (404)."""
        found = self.workspaces.get(workspace_id)
        if found is None or found.region != region:
            raise AwsError("ResourceNotFoundException", f"Workspace {workspace_id} not found.", 404,
                           resourceId=workspace_id, resourceType="WORKSPACE")
        return found

    def by_arn(self, arn: str) -> Workspace:
        """A workspace by ARN, or ResourceNotFoundException (404)."""
        for workspace in self.workspaces.values():
            if workspace.arn == arn:
                return workspace
        raise AwsError("ResourceNotFoundException", f"Resource {arn} not found.", 404, resourceId=arn,
                       resourceType="WORKSPACE")


def _check_create(ctx: AwsContext, p: dict[str, Any]) -> None:
    """What the model cannot say: CUSTOMER_MANAGED needs a role that exists (the API reference: "you must also
    specify a workspaceRoleArn"); ORGANIZATION needs organizational units."""
    role = p.get("workspaceRoleArn")
    customer_managed = p.get("permissionType") == "CUSTOMER_MANAGED"
    if customer_managed and p.get("accountAccessType") == "CURRENT_ACCOUNT" and not role:
        raise validation("workspaceRoleArn is required when permissionType is CUSTOMER_MANAGED.")
    if role:
        try:
            ctx.iam().get_role(str(role).rsplit("/", 1)[-1])
        except Exception as exc:
            raise validation(f"The role {role} does not exist.") from exc
    if p.get("accountAccessType") == "ORGANIZATION" and not p.get("workspaceOrganizationalUnits"):
        raise validation("workspaceOrganizationalUnits is required when accountAccessType is ORGANIZATION.")


class GrafanaOps:
    """The Amazon Managed Grafana operations, one named handler each."""

    def __init__(self, ctx: AwsContext, state: GrafanaState) -> None:
        self.ctx = ctx
        self.state = state

    def create(self, req: AwsRequest) -> RawResponse:
        """CreateWorkspace."""
        p = req.params
        _check_create(self.ctx, p)
        token = p.get("clientToken")
        with self.ctx.locked():
            for existing in self.state.workspaces.values():
                if token and existing.client_token == token and existing.region == req.region:
                    return json_response(req, {"workspace": existing.shape()}, 202)
            wid = f"g-{hex_id(10)}"
            now = self.ctx.clock.wall()
            workspace = Workspace(
                id=wid, arn=self.ctx.arn("grafana", req.region, f"/workspaces/{wid}"), region=req.region,
                account_access_type=str(p["accountAccessType"]), permission_type=str(p["permissionType"]),
                providers=list(p["authenticationProviders"]), created=now, name=p.get("workspaceName"),
                description=p.get("workspaceDescription"), role_arn=p.get("workspaceRoleArn"),
                data_sources=list(p.get("workspaceDataSources") or []), tags=dict(p.get("tags") or {}),
                client_token=token,
            )
            self.state.workspaces[wid] = workspace
            fails = self.ctx.faults.lifecycle("grafana_failure") is not None

            def settled() -> None:
                if workspace.status == "CREATING":
                    workspace.status = "CREATION_FAILED" if fails else "ACTIVE"
                    workspace.modified = self.ctx.clock.wall()

            self.ctx.later(CREATE_SECONDS, settled)
            return json_response(req, {"workspace": workspace.shape()}, 202)

    def describe(self, req: AwsRequest) -> RawResponse:
        """DescribeWorkspace."""
        with self.ctx.locked():
            workspace = self.state.find(req.region, str(req.params["workspaceId"]))
            return json_response(req, {"workspace": workspace.shape()})

    def list_workspaces(self, req: AwsRequest) -> RawResponse:
        """ListWorkspaces."""
        with self.ctx.locked():
            items = [w.summary() for w in sorted(self.state.workspaces.values(), key=lambda w: w.created)
                     if w.region == req.region]
        try:
            return json_response(req, page(req.params, copy.deepcopy(items), "workspaces", camel=True))
        except AwsError as exc:  # Grafana answers a token it did not issue with a ValidationException
            raise validation(exc.message) from exc

    def delete(self, req: AwsRequest) -> RawResponse:
        """DeleteWorkspace."""
        with self.ctx.locked():
            workspace = self.state.find(req.region, str(req.params["workspaceId"]))
            if workspace.status != "DELETING":
                workspace.status = "DELETING"
                workspace.modified = self.ctx.clock.wall()

                def gone() -> None:
                    self.state.workspaces.pop(workspace.id, None)

                self.ctx.later(DELETE_SECONDS, gone)
            return json_response(req, {"workspace": workspace.shape()}, 202)

    def tag(self, req: AwsRequest) -> RawResponse:
        """TagResource."""
        with self.ctx.locked():
            workspace = self.state.by_arn(str(req.params["resourceArn"]))
            tags = {**workspace.tags, **dict(req.params.get("tags") or {})}
            if len(tags) > 50:
                raise validation("A workspace can have at most 50 tags.")
            workspace.tags = tags
            return json_response(req, {})

    def untag(self, req: AwsRequest) -> RawResponse:
        """UntagResource."""
        with self.ctx.locked():
            workspace = self.state.by_arn(str(req.params["resourceArn"]))
            for key in req.params.get("tagKeys") or []:
                workspace.tags.pop(str(key), None)
            return json_response(req, {})

    def list_tags(self, req: AwsRequest) -> RawResponse:
        """ListTagsForResource."""
        with self.ctx.locked():
            return json_response(req, {"tags": dict(self.state.by_arn(str(req.params["resourceArn"])).tags)})


def register(ctx: AwsContext, state: GrafanaState) -> None:
    """Answer the Amazon Managed Grafana workspace API from `state`."""
    ops = GrafanaOps(ctx, state)
    for operation, handler in (
        ("CreateWorkspace", ops.create),
        ("DescribeWorkspace", ops.describe),
        ("ListWorkspaces", ops.list_workspaces),
        ("DeleteWorkspace", ops.delete),
        ("TagResource", ops.tag),
        ("UntagResource", ops.untag),
        ("ListTagsForResource", ops.list_tags),
    ):
        ctx.route(SERVICE, operation)(handler)
    ctx.on_reset(state.reset)
