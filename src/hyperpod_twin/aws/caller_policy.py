"""The control plane's own calls judged by the identity policies its principal holds in the twin's IAM, for the
calls whose IAM conditions guard against escalation and foreign deletes (role writes and the permissions boundary,
cluster and node deletes, route and subnet wiring, security-group ingress and S3 endpoint route tables): refused
as AWS refuses them, AccessDenied."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from hyperpod_twin.iam_eval import evaluate
from hyperpod_twin.role_usage import backend_documents

from .context import AwsContext
from .protocol import AwsError, AwsRequest

if TYPE_CHECKING:
    from .sagemaker_hyperpod import HyperPod

log = logging.getLogger(__name__)

# Calls whose User-Agent ends in this product token are the control plane's (as in the call log); the tests' own
# clients and the operator's tools act as the account's administrator.
CONTROL_PLANE_AGENT = "instantstart/"
Request = tuple[str, str, dict[str, Any]]  # (IAM action, resource ARN, condition context)
# One call may be authorized on several resources (ModifyVpcEndpoint: the endpoint and each added route table).
Resolver = Callable[[AwsContext, AwsRequest], Request | list[Request]]

ROLE_ACTIONS = (
    "AttachRolePolicy", "DeleteRole", "DeleteRolePermissionsBoundary", "DeleteRolePolicy", "DetachRolePolicy",
    "PutRolePermissionsBoundary", "PutRolePolicy", "TagRole", "UpdateAssumeRolePolicy",
)
HYPERPOD_ACTIONS = ("BatchDeleteClusterNodes", "BatchReplaceClusterNodes", "DeleteCluster")
CALLER_POLICY_NAME = "control-plane"


@dataclass(frozen=True)
class OperatorSetup:
    """What the operator puts into the account before the control plane runs, as the management environment stack
    does: customer managed policies (the permissions boundary) and the caller principal's own policy."""

    caller_policy: dict[str, Any] | None = None
    account_policies: dict[str, dict[str, Any]] = field(default_factory=dict)


def apply_setup(ctx: AwsContext, setup: OperatorSetup) -> None:
    """Create the managed policies and give the caller principal its policy (part of every reset's baseline)."""
    iam = ctx.iam()
    for name, document in setup.account_policies.items():
        try:
            iam.create_policy("", "/", json.dumps(document), name, [])
        except Exception as exc:  # already there (baseline run twice)
            log.debug("managed policy %s: %s", name, exc)
    if setup.caller_policy is None:
        return
    principal = ctx.caller_principal
    name, text = principal.rsplit("/", 1)[-1], json.dumps(setup.caller_policy)
    if ":role/" in principal:
        iam.put_role_policy(name, CALLER_POLICY_NAME, text)
    else:
        iam.put_user_policy(name, CALLER_POLICY_NAME, text)


def is_control_plane(req: AwsRequest) -> bool:
    """Whether the request comes from the control plane (its botocore User-Agent carries its product token)."""
    agent = next((v for k, v in req.headers.items() if k.lower() == "user-agent"), "")
    return any(part.startswith(CONTROL_PLANE_AGENT) for part in agent.split())


def _tag_context(tags: dict[str, str], prefix: str = "aws:ResourceTag") -> dict[str, Any]:
    return {f"{prefix}/{k}": v for k, v in tags.items()}


def _query_tags(params: dict[str, Any]) -> dict[str, str]:
    """Tags.member.N.Key/Value of a query-protocol request as a map."""
    out = {}
    for key, value in params.items():
        if key.startswith("Tags.member.") and key.endswith(".Key"):
            out[str(value)] = str(params.get(key[: -len("Key")] + "Value", ""))
    return out


def _create_role(ctx: AwsContext, req: AwsRequest) -> Request:
    p = req.params
    path = str(p.get("Path") or "/")
    context = _tag_context(_query_tags(p), "aws:RequestTag")
    if p.get("PermissionsBoundary"):
        context["iam:PermissionsBoundary"] = str(p["PermissionsBoundary"])
    return "iam:CreateRole", f"arn:aws:iam::{ctx.account_id}:role{path}{p.get('RoleName', '')}", context


def _role_action(operation: str) -> Resolver:
    def resolve(ctx: AwsContext, req: AwsRequest) -> Request:
        p = req.params
        name = str(p.get("RoleName", ""))
        arn, context = f"arn:aws:iam::{ctx.account_id}:role/{name}", {}
        try:
            role = ctx.iam().get_role(name)
        except Exception:
            role = None  # IAM authorizes before it looks: moto answers NoSuchEntity afterwards
        if role is not None:
            arn = str(role.arn)
            listed = role.tags.values() if isinstance(role.tags, dict) else role.tags
            context = _tag_context({str(t["Key"]): str(t["Value"]) for t in listed})
            if role.permissions_boundary_arn:
                context["iam:PermissionsBoundary"] = str(role.permissions_boundary_arn)
        if operation == "PutRolePermissionsBoundary":
            context["iam:PermissionsBoundary"] = str(p.get("PermissionsBoundary", ""))
        if operation in ("AttachRolePolicy", "DetachRolePolicy"):
            context["iam:PolicyARN"] = str(p.get("PolicyArn", ""))
        return f"iam:{operation}", arn, context

    return resolve


def _eks_delete(ctx: AwsContext, req: AwsRequest) -> Request:
    name = unquote(str(req.params.get("name", "")))
    arn, context = ctx.arn("eks", req.region, f"cluster/{name}"), {}
    cluster = ctx.eks(req.region).clusters.get(name)
    if cluster is not None:
        arn = str(cluster.arn)
        context = _tag_context({str(k): str(v) for k, v in (cluster.tags or {}).items()})
    return "eks:DeleteCluster", arn, context


def _hyperpod_action(hyperpod: HyperPod, operation: str) -> Resolver:
    def resolve(ctx: AwsContext, req: AwsRequest) -> Request:
        name = str(req.params.get("ClusterName", ""))
        try:
            cluster = hyperpod.get(req.region, name)
        except AwsError:
            return f"sagemaker:{operation}", ctx.arn("sagemaker", req.region, f"cluster/{name}"), {}
        tags = {str(t["Key"]): str(t["Value"]) for t in cluster.tags}
        return f"sagemaker:{operation}", cluster.arn, _tag_context(tags)

    return resolve


def _ec2_vpc(backend: Any, kind: str, resource_id: str) -> str | None:
    """The VPC of an EC2 resource (None when it does not exist: EC2 answers NotFound after authorizing)."""
    try:
        if kind == "route-table":
            found: Any = backend.route_tables.get(resource_id)
        elif kind == "subnet":
            found = backend.get_subnet(resource_id)
        elif kind == "security-group":
            found = backend.get_security_group_from_id(resource_id)
        else:
            found = backend.vpc_end_points.get(resource_id)
    except Exception:
        found = None
    return None if found is None else str(found.vpc_id)


def _ec2_request(ctx: AwsContext, region: str, action: str, kind: str, resource_id: str) -> Request:
    backend = ctx.ec2(region)
    context = _tag_context(dict(backend.tags.get(resource_id, {})))
    vpc_id = _ec2_vpc(backend, kind, resource_id)
    if vpc_id is not None:
        context["ec2:Vpc"] = ctx.arn("ec2", region, f"vpc/{vpc_id}")
    return action, ctx.arn("ec2", region, f"{kind}/{resource_id}"), context


def _ec2_action(operation: str, id_param: str, kind: str) -> Resolver:
    def resolve(ctx: AwsContext, req: AwsRequest) -> list[Request]:
        found = [_ec2_request(ctx, req.region, f"ec2:{operation}", kind, str(req.params.get(id_param, "")))]
        if operation == "ModifyVpcEndpoint":  # each added route table is authorized too
            tables = [str(v) for k, v in sorted(req.params.items()) if k.startswith("AddRouteTableId.")]
            found += [_ec2_request(ctx, req.region, f"ec2:{operation}", "route-table", t) for t in tables]
        return found

    return resolve


def resolvers(hyperpod: HyperPod) -> dict[tuple[str, str], Resolver]:
    """Which calls are judged, and how each one's action, resource and condition context are found."""
    table: dict[tuple[str, str], Resolver] = {("iam", "CreateRole"): _create_role,
                                              ("eks", "DeleteCluster"): _eks_delete}
    table.update({("iam", op): _role_action(op) for op in ROLE_ACTIONS})
    table.update({("sagemaker", op): _hyperpod_action(hyperpod, op) for op in HYPERPOD_ACTIONS})
    table[("ec2", "CreateRoute")] = _ec2_action("CreateRoute", "RouteTableId", "route-table")
    table[("ec2", "ModifySubnetAttribute")] = _ec2_action("ModifySubnetAttribute", "SubnetId", "subnet")
    table[("ec2", "AuthorizeSecurityGroupIngress")] = _ec2_action(
        "AuthorizeSecurityGroupIngress", "GroupId", "security-group")
    table[("ec2", "ModifyVpcEndpoint")] = _ec2_action("ModifyVpcEndpoint", "VpcEndpointId", "vpc-endpoint")
    return table


def caller_documents(ctx: AwsContext) -> list[dict[str, Any]]:
    """The identity policies of the caller's principal (its user, or the role its session is of); none when the
    twin's caller has none, i.e. the operator gave it no policy and it is the account's administrator."""
    principal = ctx.caller_principal
    if ":role/" in principal:
        return backend_documents(ctx.iam(), principal) or []
    try:
        user = ctx.iam().get_user(principal.rsplit("/", 1)[-1])
    except Exception:
        return []
    raw: list[Any] = list(user.policies.values())
    for policy in user.managed_policies.values():
        raw.append(next(v.document for v in policy.versions if v.version_id == policy.default_version_id))
    return [json.loads(d) if isinstance(d, str) else d for d in raw]


def denial(ctx: AwsContext, req: AwsRequest, action: str, resource: str, decision: str) -> AwsError:
    """AWS's refusal of an unauthorized call, in the service's own error code."""
    how = "with an explicit deny in an identity-based policy" if decision == "ExplicitDeny" else (
        f"because no identity-based policy allows the {action} action")
    text = f"User: {ctx.caller_arn} is not authorized to perform: {action} on resource: {resource} {how}"
    if req.service == "ec2":
        return AwsError("UnauthorizedOperation", f"You are not authorized to perform this operation. {text}", 403)
    if req.service == "iam":
        return AwsError("AccessDenied", text, 403)
    return AwsError("AccessDeniedException", text, 400 if req.service == "sagemaker" else 403)


def register(ctx: AwsContext, hyperpod: HyperPod) -> None:
    """Judge the control plane's guarded calls against its principal's policies before anything answers them."""
    table = resolvers(hyperpod)

    def authorize(req: AwsRequest) -> AwsError | None:
        resolve = table.get((req.service, req.operation or ""))
        if resolve is None or not is_control_plane(req):
            return None
        try:
            with ctx.locked():
                documents = caller_documents(ctx)
                if not documents:
                    return None
                found = resolve(ctx, req)
        except Exception as exc:  # a bug in the twin: loud, and a 4xx botocore does not retry
            log.exception("judging %s.%s failed", req.service, req.operation)
            return AwsError("InternalFailure", f"The twin could not authorize {req.operation}: {exc}", 400)
        for action, resource, context in found if isinstance(found, list) else [found]:
            decision = evaluate(documents, action, resource, context)
            if decision != "Allow":
                return denial(ctx, req, action, resource, decision)
        return None

    ctx.authorizer = authorize
