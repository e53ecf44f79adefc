"""EKS access entries, access policy associations and pod identity associations."""

from __future__ import annotations

import copy
import re
from typing import Any

from .context import AwsContext, alnum_id
from .eks_clusters import EKS, EksState, invalid_param, not_found
from .eks_pod_identity import iam_principal_exists, register_pod_identity
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse, json_response

POLICY_PREFIX = "arn:aws:eks::aws:cluster-access-policy/"
ACCESS_POLICIES = (
    "AmazonEKSAdminPolicy",
    "AmazonEKSAdminViewPolicy",
    "AmazonEKSClusterAdminPolicy",
    "AmazonEKSEditPolicy",
    "AmazonEKSViewPolicy",
    "AmazonEKSAutoNodePolicy",
    "AmazonEKSBlockStoragePolicy",
    "AmazonEKSComputePolicy",
    "AmazonEKSLoadBalancingPolicy",
    "AmazonEKSNetworkingPolicy",
    "AmazonSagemakerHyperpodClusterSchedulerPolicy",
    "AmazonSagemakerHyperpodControllerPolicy",
    "AmazonSagemakerHyperpodInferenceMonitoringPolicy",
    "AmazonSagemakerHyperpodInferencePolicy",
    "AmazonSagemakerHyperpodSystemNamespacePolicy",
    "AmazonSagemakerHyperpodTrainingPolicy",
)
ENTRY_TYPES = ("STANDARD", "FARGATE_LINUX", "EC2_LINUX", "EC2_WINDOWS", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX")
PRINCIPAL_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:(role|user)/.+$")

def check_principal(ctx: AwsContext, principal: str, kind: str) -> None:
    """EKS's checks of an access entry's principal: an IAM role or user ARN (never an STS session),
    that exists; node entry types (EC2_LINUX, HYPERPOD_LINUX, …) need a role."""
    if ":assumed-role/" in principal or principal.split(":")[2:3] == ["sts"]:
        raise invalid_param(
            f"The principalArn parameter format is not valid: {principal}. STS assumed-role session ARNs are not "
            "supported; use the IAM role's ARN"
        )
    if not PRINCIPAL_RE.match(principal):
        raise invalid_param(f"The principalArn parameter format is not valid: {principal}")
    if kind != "STANDARD" and ":role/" not in principal:
        raise invalid_param(f"Access entries of type {kind} require an IAM role principal: {principal}")
    if not iam_principal_exists(ctx, principal):
        raise invalid_param(f"The specified principalArn could not be found: {principal}")


def _require_api_mode(cluster: Any) -> None:
    mode = cluster.access_config.get("authenticationMode", "CONFIG_MAP")
    if mode not in ("API", "API_AND_CONFIG_MAP"):
        raise AwsError(
            "InvalidRequestException",
            "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this "
            "operation.",
            clusterName=cluster.name,
        )


def _entry(ctx: AwsContext, region: str, cluster: Any, principal: str, p: dict[str, Any]) -> dict[str, Any]:
    kind = str(p.get("type") or "STANDARD")
    if kind not in ENTRY_TYPES:
        raise invalid_param(f"Unsupported access entry type {kind}")
    groups = list(p.get("kubernetesGroups") or [])
    username = p.get("username")
    if kind != "STANDARD":
        if groups or username:
            raise invalid_param(f"kubernetesGroups and username cannot be set for access entries of type {kind}")
        username = "system:node:{{EC2PrivateDNSName}}" if kind != "FARGATE_LINUX" else "system:node:{{SessionName}}"
    elif not username:
        # EKS derives the username from the principal: a role's sessions authenticate as
        # arn:aws:sts::<account>:assumed-role/<role name>/<session>; a user as its own ARN.
        if ":role/" in principal:
            account = principal.split(":")[4]
            role_name = principal.rsplit("/", 1)[-1]
            username = f"arn:aws:sts::{account}:assumed-role/{role_name}/{{{{SessionName}}}}"
        else:
            username = principal
    now = ctx.clock.wall()
    uid = alnum_id(8)
    return {
        "clusterName": cluster.name,
        "principalArn": principal,
        "kubernetesGroups": groups,
        "accessEntryArn": ctx.arn(
            "eks", region, f"access-entry/{cluster.name}/{principal.split(':', 5)[-1].replace('/', '/')}/{uid}"
        ),
        "createdAt": now,
        "modifiedAt": now,
        "tags": dict(p.get("tags") or {}),
        "username": username,
        "type": kind,
    }


def bootstrap_creator(ctx: AwsContext, state: EksState, region: str, cluster: Any) -> None:
    """bootstrapClusterCreatorAdminPermissions: the creator gets an entry with cluster-admin."""
    extra = state.cluster_extras(region, cluster.name)
    principal = ctx.caller_principal
    if principal in extra.access_entries:
        return
    extra.access_entries[principal] = _entry(ctx, region, cluster, principal, {})
    policy = POLICY_PREFIX + "AmazonEKSClusterAdminPolicy"
    extra.policies.setdefault(principal, {})[policy] = {
        "policyArn": policy,
        "accessScope": {"type": "cluster", "namespaces": []},
        "associatedAt": ctx.clock.wall(),
        "modifiedAt": ctx.clock.wall(),
    }


class AccessEntryOps:
    """The EKS access entry and access policy operations, one named handler each."""

    def __init__(self, ctx: AwsContext, state: EksState) -> None:
        self.ctx = ctx
        self.state = state

    def _entry_of(self, region: str, cluster: Any, principal: Any) -> dict[str, Any]:
        entry = self.state.cluster_extras(region, cluster.name).access_entries.get(str(principal))
        if entry is None:
            raise not_found(f"The specified access entry resource is not found: {principal}", clusterName=cluster.name)
        return entry

    def create_entry(self, req: AwsRequest) -> RawResponse:
        """CreateAccessEntry."""
        p = req.params
        principal = str(p.get("principalArn") or "")
        with self.ctx.locked():
            cluster = self.state.active(req.region, p.get("clusterName"))
            _require_api_mode(cluster)
            check_principal(self.ctx, principal, str(p.get("type") or "STANDARD"))
            extra = self.state.cluster_extras(req.region, cluster.name)
            if principal in extra.access_entries:
                raise AwsError(
                    "ResourceInUseException",
                    "The specified access entry resource is already in use on this cluster.",
                    409,
                    clusterName=cluster.name,
                )
            entry = _entry(self.ctx, req.region, cluster, principal, p)
            extra.access_entries[principal] = entry
            self.state.publish_access(req.region, cluster)
            return json_response(req, {"accessEntry": copy.deepcopy(entry)})

    def describe_entry(self, req: AwsRequest) -> RawResponse:
        """DescribeAccessEntry."""
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, req.params.get("clusterName"))
            return json_response(
                req, {"accessEntry": copy.deepcopy(self._entry_of(req.region, cluster, req.params.get("principalArn")))}
            )

    def list_entries(self, req: AwsRequest) -> RawResponse:
        """ListAccessEntries."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            _require_api_mode(cluster)
            extra = self.state.cluster_extras(req.region, cluster.name)
            arns = sorted(extra.access_entries)
            if p.get("associatedPolicyArn"):
                arns = [a for a in arns if p["associatedPolicyArn"] in extra.policies.get(a, {})]
        return json_response(req, {"accessEntries": arns})

    def update_entry(self, req: AwsRequest) -> RawResponse:
        """UpdateAccessEntry."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            entry = self._entry_of(req.region, cluster, p.get("principalArn"))
            if entry["type"] != "STANDARD" and (p.get("kubernetesGroups") or p.get("username")):
                raise invalid_param("kubernetesGroups and username can only be updated on STANDARD access entries")
            if "kubernetesGroups" in p:
                entry["kubernetesGroups"] = list(p["kubernetesGroups"] or [])
            if p.get("username"):
                entry["username"] = p["username"]
            entry["modifiedAt"] = self.ctx.clock.wall()
            self.state.publish_access(req.region, cluster)
            return json_response(req, {"accessEntry": copy.deepcopy(entry)})

    def delete_entry(self, req: AwsRequest) -> RawResponse:
        """DeleteAccessEntry."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            self._entry_of(req.region, cluster, p.get("principalArn"))
            extra = self.state.cluster_extras(req.region, cluster.name)
            del extra.access_entries[str(p["principalArn"])]
            extra.policies.pop(str(p["principalArn"]), None)
            self.state.publish_access(req.region, cluster)
        return json_response(req, {})

    def associate(self, req: AwsRequest) -> RawResponse:
        """AssociateAccessPolicy."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            entry = self._entry_of(req.region, cluster, p.get("principalArn"))
            policy = str(p.get("policyArn") or "")
            if not policy.startswith(POLICY_PREFIX) or policy.removeprefix(POLICY_PREFIX) not in ACCESS_POLICIES:
                raise invalid_param(f"The policyArn {policy} is not a valid EKS access policy")
            if entry["type"] != "STANDARD":
                raise AwsError(
                    "InvalidRequestException",
                    f"Access policies cannot be associated with access entries of type {entry['type']}",
                    clusterName=cluster.name,
                )
            scope = copy.deepcopy(p.get("accessScope") or {})
            if scope.get("type") not in ("cluster", "namespace"):
                raise invalid_param("accessScope.type must be cluster or namespace")
            if scope["type"] == "namespace" and not scope.get("namespaces"):
                raise invalid_param("accessScope.namespaces is required for a namespace scope")
            scope.setdefault("namespaces", [])
            now = self.ctx.clock.wall()
            extra = self.state.cluster_extras(req.region, cluster.name)
            previous = extra.policies.setdefault(entry["principalArn"], {}).get(policy)
            assoc = {
                "policyArn": policy,
                "accessScope": scope,
                "associatedAt": previous["associatedAt"] if previous else now,
                "modifiedAt": now,
            }
            extra.policies[entry["principalArn"]][policy] = assoc
            self.state.publish_access(req.region, cluster)
        return json_response(
            req, {"clusterName": cluster.name, "principalArn": entry["principalArn"], "associatedAccessPolicy": assoc}
        )

    def disassociate(self, req: AwsRequest) -> RawResponse:
        """DisassociateAccessPolicy."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            entry = self._entry_of(req.region, cluster, p.get("principalArn"))
            policies = self.state.cluster_extras(req.region, cluster.name).policies.get(entry["principalArn"], {})
            if str(p.get("policyArn")) not in policies:
                raise not_found(
                    f"The specified policy is not associated: {p.get('policyArn')}", clusterName=cluster.name
                )
            del policies[str(p["policyArn"])]
            self.state.publish_access(req.region, cluster)
        return json_response(req, {})

    def list_associated(self, req: AwsRequest) -> RawResponse:
        """ListAssociatedAccessPolicies."""
        p = req.params
        with self.ctx.locked():
            cluster = self.state.cluster(req.region, p.get("clusterName"))
            entry = self._entry_of(req.region, cluster, p.get("principalArn"))
            policies = self.state.cluster_extras(req.region, cluster.name).policies
            items = list(policies.get(entry["principalArn"], {}).values())
        return json_response(
            req,
            {
                "clusterName": cluster.name,
                "principalArn": entry["principalArn"],
                "associatedAccessPolicies": copy.deepcopy(items),
            },
        )

    def list_policies(self, req: AwsRequest) -> RawResponse:
        """ListAccessPolicies."""
        items = [{"name": n, "arn": POLICY_PREFIX + n} for n in ACCESS_POLICIES]
        return json_response(req, {"accessPolicies": items})


def register(ctx: AwsContext, state: EksState) -> None:
    """Answer the access-entry, access-policy and pod-identity APIs."""
    ops = AccessEntryOps(ctx, state)
    for operation, handler in (
        ("CreateAccessEntry", ops.create_entry),
        ("DescribeAccessEntry", ops.describe_entry),
        ("ListAccessEntries", ops.list_entries),
        ("UpdateAccessEntry", ops.update_entry),
        ("DeleteAccessEntry", ops.delete_entry),
        ("AssociateAccessPolicy", ops.associate),
        ("DisassociateAccessPolicy", ops.disassociate),
        ("ListAssociatedAccessPolicies", ops.list_associated),
        ("ListAccessPolicies", ops.list_policies),
    ):
        ctx.route(EKS, operation)(handler)
    register_pod_identity(ctx, state)
    register_tags(ctx, state)


def register_tags(ctx: AwsContext, state: EksState) -> None:
    """Tags on add-on, access entry and pod identity ARNs; moto keeps cluster and node group tags."""

    def owned(arn: str) -> dict[str, Any] | None:
        for extra in state.extras.values():
            for addon in extra.addons.values():
                if addon["addonArn"] == arn:
                    return addon
            for assoc in extra.pod_identities.values():
                if assoc["associationArn"] == arn:
                    return assoc
            for entry in extra.access_entries.values():
                if entry["accessEntryArn"] == arn:
                    return entry
        return None

    @ctx.route(EKS, "TagResource")
    def tag(req: AwsRequest) -> RawResponse:
        with ctx.locked():
            obj = owned(str(req.params.get("resourceArn")))
            if obj is None:
                raise PassThrough()
            obj.setdefault("tags", {}).update(req.params.get("tags") or {})
        return json_response(req, {})

    @ctx.route(EKS, "UntagResource")
    def untag(req: AwsRequest) -> RawResponse:
        with ctx.locked():
            obj = owned(str(req.params.get("resourceArn")))
            if obj is None:
                raise PassThrough()
            for key in req.params.get("tagKeys") or []:
                obj.get("tags", {}).pop(key, None)
        return json_response(req, {})

    @ctx.route(EKS, "ListTagsForResource")
    def list_tags(req: AwsRequest) -> RawResponse:
        with ctx.locked():
            obj = owned(str(req.params.get("resourceArn")))
            if obj is None:
                raise PassThrough()
            return json_response(req, {"tags": dict(obj.get("tags") or {})})
