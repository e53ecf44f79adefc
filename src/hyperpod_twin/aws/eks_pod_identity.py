"""EKS Pod Identity associations: their API and the association records CreateAddon shares."""

from __future__ import annotations

import copy
import re
from typing import Any

from .context import AwsContext, alnum_id
from .eks_clusters import EKS, EksState, invalid_param, not_found
from .protocol import AwsError, AwsRequest, RawResponse, json_response

ROLE_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/.+$")


def iam_principal_exists(ctx: AwsContext, arn: str) -> bool:
    """Whether the IAM role or user `arn` exists in the account (matched by name, as the path may differ)."""
    iam = ctx.iam()
    name = arn.rsplit("/", 1)[-1]
    if ":role/" in arn:
        return any(role.name == name for role in list(iam.roles.values()))
    return name in iam.users


class PodIdentityOps:
    """The EKS pod identity association operations, one named handler each."""

    def __init__(self, ctx: AwsContext, state: EksState) -> None:
        self.ctx = ctx
        self.state = state

    def _find(self, region: str, cluster: Any, association_id: Any) -> dict[str, Any]:
        assoc = self.state.cluster_extras(region, cluster.name).pod_identities.get(str(association_id))
        if assoc is None:
            raise not_found(f"Pod Identity Association {association_id} not found", clusterName=cluster.name)
        return assoc

    def create(self, req: AwsRequest) -> RawResponse:
        """CreatePodIdentityAssociation."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.active(req.region, p.get("clusterName"))
            assoc = create_association(self.ctx, self.state, req.region, cluster, p)
            return json_response(req, {"association": copy.deepcopy(assoc)})

    def describe(self, req: AwsRequest) -> RawResponse:
        """DescribePodIdentityAssociation."""
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, req.params.get("clusterName"))
            assoc = self._find(req.region, cluster, req.params.get("associationId"))
            return json_response(req, {"association": copy.deepcopy(assoc)})

    def list_assocs(self, req: AwsRequest) -> RawResponse:
        """ListPodIdentityAssociations."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            items = list(self.state.cluster_extras(req.region, cluster.name).pod_identities.values())
        if p.get("namespace"):
            items = [a for a in items if a["namespace"] == p["namespace"]]
        if p.get("serviceAccount"):
            items = [a for a in items if a["serviceAccount"] == p["serviceAccount"]]
        keys = ("clusterName", "namespace", "serviceAccount", "associationArn", "associationId", "ownerArn")
        summaries = [{k: a[k] for k in keys if k in a} for a in items]
        return json_response(req, {"associations": summaries})

    def update(self, req: AwsRequest) -> RawResponse:
        """UpdatePodIdentityAssociation."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            assoc = self._find(req.region, cluster, p.get("associationId"))
            if p.get("roleArn"):
                if not ROLE_RE.match(str(p["roleArn"])):
                    raise invalid_param(f"Invalid role ARN {p['roleArn']}")
                assoc["roleArn"] = p["roleArn"]
            for key in ("disableSessionTags", "targetRoleArn", "policy"):
                if key in p:
                    assoc[key] = p[key]
            assoc["modifiedAt"] = self.ctx.clock.wall()
            _publish(self.ctx, self.state, req.region, cluster)
            return json_response(req, {"association": copy.deepcopy(assoc)})

    def delete(self, req: AwsRequest) -> RawResponse:
        """DeletePodIdentityAssociation."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            assoc = self._find(req.region, cluster, p.get("associationId"))
            del self.state.cluster_extras(req.region, cluster.name).pod_identities[assoc["associationId"]]
            _publish(self.ctx, self.state, req.region, cluster)
            return json_response(req, {"association": copy.deepcopy(assoc)})


def register_pod_identity(ctx: AwsContext, state: EksState) -> None:
    """Answer the pod identity association APIs (create, describe, list, update, delete)."""
    ops = PodIdentityOps(ctx, state)
    for operation, handler in (
        ("CreatePodIdentityAssociation", ops.create),
        ("DescribePodIdentityAssociation", ops.describe),
        ("ListPodIdentityAssociations", ops.list_assocs),
        ("UpdatePodIdentityAssociation", ops.update),
        ("DeletePodIdentityAssociation", ops.delete),
    ):
        ctx.route(EKS, operation)(handler)


def create_association(
    ctx: AwsContext, state: EksState, region: str, cluster: Any, p: dict[str, Any], owner: str | None = None
) -> dict[str, Any]:
    """Create one pod identity association (also used by CreateAddon's podIdentityAssociations)."""
    ns, sa, role = p.get("namespace"), p.get("serviceAccount"), str(p.get("roleArn") or "")
    if not ns or not sa:
        raise invalid_param("namespace and serviceAccount are required")
    if not ROLE_RE.match(role):
        raise invalid_param(f"Invalid role ARN {role}")
    if not iam_principal_exists(ctx, role):
        raise invalid_param(f"Role {role} does not exist")
    extra = state.cluster_extras(region, cluster.name)
    for existing in extra.pod_identities.values():
        if existing["namespace"] == ns and existing["serviceAccount"] == sa:
            raise AwsError(
                "ResourceInUseException",
                "Association already exists for the specified namespace and service account",
                409,
                clusterName=cluster.name,
            )
    aid = "a-" + alnum_id(17)
    now = ctx.clock.wall()
    assoc: dict[str, Any] = {
        "clusterName": cluster.name,
        "namespace": ns,
        "serviceAccount": sa,
        "roleArn": role,
        "associationArn": ctx.arn("eks", region, f"podidentityassociation/{cluster.name}/{aid}"),
        "associationId": aid,
        "tags": dict(p.get("tags") or {}),
        "createdAt": now,
        "modifiedAt": now,
        "disableSessionTags": bool(p.get("disableSessionTags", False)),
    }
    if owner:
        assoc["ownerArn"] = owner
    if p.get("targetRoleArn"):
        assoc["targetRoleArn"] = p["targetRoleArn"]
    if p.get("policy"):
        assoc["policy"] = p["policy"]
    extra.pod_identities[aid] = assoc
    _publish(ctx, state, region, cluster)
    return assoc


def _publish(ctx: AwsContext, state: EksState, region: str, cluster: Any) -> None:
    items = [copy.deepcopy(a) for a in state.cluster_extras(region, cluster.name).pod_identities.values()]
    ctx.emit("eks.pod_identity.changed", cluster_name=cluster.name, cluster_arn=cluster.arn, associations=items)
