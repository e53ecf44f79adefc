"""IAM calls: roles with their policies, OIDC providers (blocking, errors translated)."""

from __future__ import annotations

import json
from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, error_code, translate
from instantstart.aws.identity import account_id
from instantstart.aws.paging import collect
from instantstart.errors import NotFound, PreconditionFailed

INLINE_POLICY = "instantstart"
# The customer managed policy every role the control plane creates carries as its permissions boundary
# (deploy/iam/permissions-boundary.json, created by the operator: the management environment stack or one
# `aws iam create-policy`, docs/AWS.md). The control plane's own policy allows CreateRole, PutRolePolicy and
# AttachRolePolicy only on roles with it, and cannot change it.
BOUNDARY_POLICY = "InstantStartPermissionsBoundary"
# The tag the control plane's policy requires on a role before it may write its trust policy (OwnRolesTrust).
TAG_INSTALLATION = "instantstart:installation"


def boundary_arn(aws: AwsClients, region: str) -> str:
    """The ARN of the permissions boundary in the control plane's account (the one place that names it)."""
    return f"arn:aws:iam::{account_id(aws, region)}:policy/{BOUNDARY_POLICY}"


def _role_write(aws: AwsClients, region: str, api: str, action: str, name: str, fn: Any, **kwargs: Any) -> None:
    """One write (IAM action `api`) to role `name`. When IAM refuses it and the role lacks what the control plane's
    policy requires for `api` (the permissions boundary; for a trust policy, the installation tag), the error names
    that fix; a refusal of a role that has it is the control plane's identity lacking `api`, and says so."""
    try:
        fn(RoleName=name, **kwargs)
    except Exception as exc:
        if error_code(exc) != "AccessDenied":
            raise translate(exc, action) from exc
        boundary = boundary_arn(aws, region)
        lacking = _lacking(aws, region, name, api, boundary)
        if lacking is not None:
            if lacking == "boundary":
                need, fix = f"carry the permissions boundary {BOUNDARY_POLICY}", (
                    f"aws iam put-role-permissions-boundary --role-name {name} --permissions-boundary {boundary}")
            else:
                need, fix = f"are tagged {TAG_INSTALLATION} (trust policies)", (
                    f"aws iam tag-role --role-name {name} --tags Key={TAG_INSTALLATION},Value=<the value the "
                    "cluster's other resources carry>")
            raise PreconditionFailed(
                f"IAM refused to {action}: the control plane changes only roles that {need}; {name} lacks that.",
                hint=f"If {name} is InstantStart's from an older version: {fix}, then operation_retry. If it is "
                "someone else's, choose another clusterTag.",
                details={"role": name, "permissionsBoundary": boundary, "lacking": lacking},
            ) from exc
        error = translate(exc, action)
        error.hint = (f"The control plane's identity may not call iam:{api} on {name}: allow it on instantstart-* "
                      "roles (deploy/iam/control-plane-policy.json), then operation_retry.")
        raise error from exc


def _lacking(aws: AwsClients, region: str, name: str, api: str, boundary: str) -> str | None:
    """What role `name` lacks that the control plane's policy requires for `api` (GetRole): "tag" (a trust policy
    write without the installation tag), "boundary" (any other write without `boundary`) or None, also when the
    lookup itself fails, so a refusal is never blamed on a requirement nobody checked."""
    try:
        role = aws.iam(region).get_role(RoleName=name)["Role"]
    except Exception:  # the write's refusal is the error to report, not this lookup's
        return None
    if api == "UpdateAssumeRolePolicy":
        tags = {t.get("Key"): t.get("Value") for t in role.get("Tags") or []}
        return None if tags.get(TAG_INSTALLATION) else "tag"
    return None if (role.get("PermissionsBoundary") or {}).get("PermissionsBoundaryArn") == boundary else "boundary"


def managed_policy_exists(aws: AwsClients, region: str, arn: str) -> bool:
    """Whether the customer managed policy `arn` exists (GetPolicy)."""
    try:
        aws.iam(region).get_policy(PolicyArn=arn)
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return False
        raise translate(exc, f"look up IAM policy {arn}") from exc
    return True


def role_arn(aws: AwsClients, region: str, name: str) -> str | None:
    """The ARN of role `name`, or None when it does not exist."""
    try:
        return str(aws.iam(region).get_role(RoleName=name)["Role"]["Arn"])
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return None
        raise translate(exc, f"look up IAM role {name}") from exc


def create_role(
    aws: AwsClients, region: str, *, name: str, trust_policy: str, description: str, tags: list[dict[str, str]]
) -> str:
    """CreateRole with its trust policy and the permissions boundary (BOUNDARY_POLICY); the ARN."""
    role = call(
        f"create IAM role {name}",
        aws.iam(region).create_role,
        RoleName=name,
        AssumeRolePolicyDocument=trust_policy,
        Description=description,
        PermissionsBoundary=boundary_arn(aws, region),
        Tags=cast(Any, tags),
    )["Role"]
    return str(role["Arn"])


def attached_policies(aws: AwsClients, region: str, name: str) -> set[str]:
    """ARNs of the managed policies attached to role `name`."""
    found = collect(f"list policies of IAM role {name}", aws.iam(region), "list_attached_role_policies",
                    "AttachedPolicies", RoleName=name)
    return {p["PolicyArn"] for p in found}


def attach_policy(aws: AwsClients, region: str, name: str, policy_arn: str) -> None:
    """AttachRolePolicy."""
    _role_write(aws, region, "AttachRolePolicy", f"attach {policy_arn} to IAM role {name}", name,
                aws.iam(region).attach_role_policy, PolicyArn=policy_arn)


def inline_policy(aws: AwsClients, region: str, name: str) -> dict[str, Any] | None:
    """The role's `instantstart` inline policy document, or None when it has none."""
    try:
        document: Any = aws.iam(region).get_role_policy(RoleName=name, PolicyName=INLINE_POLICY)["PolicyDocument"]
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return None
        raise translate(exc, f"read the policy of IAM role {name}") from exc
    return cast("dict[str, Any]", json.loads(document) if isinstance(document, str) else document)


def put_inline_policy(aws: AwsClients, region: str, name: str, document: dict[str, Any]) -> None:
    """PutRolePolicy `instantstart`."""
    _role_write(aws, region, "PutRolePolicy", f"set the policy of IAM role {name}", name,
                aws.iam(region).put_role_policy, PolicyName=INLINE_POLICY, PolicyDocument=json.dumps(document))


def delete_role(aws: AwsClients, region: str, name: str) -> None:
    """Detach managed policies, delete inline ones, delete the role (NotFound when it is gone)."""
    iam = aws.iam(region)
    action = f"delete IAM role {name}"
    for policy in collect(action, iam, "list_attached_role_policies", "AttachedPolicies", RoleName=name):
        call(action, iam.detach_role_policy, RoleName=name, PolicyArn=policy["PolicyArn"])
    for inline in collect(action, iam, "list_role_policies", "PolicyNames", RoleName=name):
        call(action, iam.delete_role_policy, RoleName=name, PolicyName=inline)
    call(action, iam.delete_role, RoleName=name)


def oidc_provider_arn(aws: AwsClients, region: str, issuer: str) -> str | None:
    """The ARN of the IAM OIDC provider of `issuer`, or None."""
    host = issuer.removeprefix("https://")
    found = call("list OIDC providers", aws.iam(region).list_open_id_connect_providers)["OpenIDConnectProviderList"]
    return next((str(p["Arn"]) for p in found if p.get("Arn", "").endswith("/" + host)), None)


def oidc_provider_tags(aws: AwsClients, region: str, arn: str) -> dict[str, str]:
    """The tags of an IAM OIDC provider (GetOpenIDConnectProvider) as a map."""
    answer = call(
        "read the OIDC provider", aws.iam(region).get_open_id_connect_provider, OpenIDConnectProviderArn=arn
    )
    return {str(t["Key"]): str(t["Value"]) for t in answer.get("Tags", [])}


def create_oidc_provider(
    aws: AwsClients, region: str, *, issuer: str, thumbprint: str, tags: list[dict[str, str]]
) -> str:
    """CreateOpenIDConnectProvider for STS (IRSA); its ARN."""
    answer = call(
        "register the cluster's OIDC provider",
        aws.iam(region).create_open_id_connect_provider,
        Url=issuer,
        ClientIDList=["sts.amazonaws.com"],
        ThumbprintList=[thumbprint],
        Tags=cast(Any, tags),
    )
    return str(answer["OpenIDConnectProviderArn"])


def delete_oidc_provider(aws: AwsClients, region: str, arn: str) -> None:
    """DeleteOpenIDConnectProvider."""
    call(f"delete OIDC provider {arn}", aws.iam(region).delete_open_id_connect_provider, OpenIDConnectProviderArn=arn)


def get_role(aws: AwsClients, region: str, name: str) -> dict[str, Any] | None:
    """GetRole's `Role` with its trust policy as a dict, or None when the role does not exist."""
    try:
        role: dict[str, Any] = dict(aws.iam(region).get_role(RoleName=name)["Role"])
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return None
        raise translate(exc, f"look up IAM role {name}") from exc
    trust = role.get("AssumeRolePolicyDocument")
    if isinstance(trust, str):
        from urllib.parse import unquote

        role["AssumeRolePolicyDocument"] = json.loads(unquote(trust))
    return role


def update_trust_policy(aws: AwsClients, region: str, name: str, document: dict[str, Any]) -> None:
    """UpdateAssumeRolePolicy of role `name`."""
    _role_write(aws, region, "UpdateAssumeRolePolicy", f"write the trust policy of IAM role {name}", name,
                aws.iam(region).update_assume_role_policy, PolicyDocument=json.dumps(document))


def delete_role_if_present(aws: AwsClients, region: str, name: str) -> bool:
    """delete_role, where a role already gone is success; whether one was deleted."""
    try:
        delete_role(aws, region, name)
    except NotFound:
        return False
    return True
