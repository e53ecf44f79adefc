"""The permissions boundary and the control-plane policy's role statements against the code: every managed policy
the code attaches is allowed by iam:PolicyARN and nothing else, and every action a role builder or an attached
managed policy grants stays inside the boundary while IAM writes do not."""

from __future__ import annotations

import json

import pytest
from moto.iam.aws_managed_policies import aws_managed_policies_data

from hyperpod_twin.iam_eval import evaluate, listed
from instantstart.services.account.policy import boundary_policy, control_plane_policy
from instantstart.services.base.iam import EKS_CLUSTER_POLICY, HYPERPOD_INSTANCE_POLICY
from instantstart.services.features.specs import FEATURES
from tests.support.role_usage import builder_grants


def attached_by_code() -> set[str]:
    """Every AWS managed policy ARN the control plane attaches to a role."""
    features = {arn for spec in FEATURES.values() if spec.identity for arn in spec.identity.managed_policies}
    return {EKS_CLUSTER_POLICY, HYPERPOD_INSTANCE_POLICY, *features}


def test_policy_arn_condition_lists_exactly_what_the_code_attaches() -> None:
    statement = next(s for s in control_plane_policy()["Statement"] if s["Sid"] == "OwnRolesManagedPolicies")
    assert set(statement["Condition"]["ArnEquals"]["iam:PolicyARN"]) == attached_by_code()
    assert "iam:PermissionsBoundary" in statement["Condition"]["ArnLike"]


def managed_actions() -> set[str]:
    data = json.loads(aws_managed_policies_data)
    actions = set()
    for arn in attached_by_code():
        for statement in data[arn.rsplit("/", 1)[-1]]["Document"]["Statement"]:
            if statement["Effect"] == "Allow":
                actions.update(a for a in listed(statement.get("Action")) if "*" not in a)
    return actions


def test_the_boundary_allows_what_every_role_is_granted() -> None:
    granted = {a for actions in builder_grants().values() for a in actions} | managed_actions()
    outside = sorted(a for a in granted if evaluate([boundary_policy()], a, "arn:aws:x:::y") != "Allow")
    assert outside == []


@pytest.mark.parametrize("action", ["iam:CreateRole", "iam:PutRolePolicy", "iam:AttachRolePolicy",
                                    "iam:DeleteRolePermissionsBoundary", "iam:CreatePolicyVersion",
                                    "sts:AssumeRole", "organizations:LeaveOrganization", "dynamodb:Scan"])
def test_the_boundary_keeps_escalation_outside(action: str) -> None:
    assert evaluate([boundary_policy()], action, "arn:aws:iam::1:role/instantstart-x") != "Allow"
