"""Writes the control plane's IAM policy and the permissions boundary of its roles (data/iam + deploy/iam).

The statements are written here once, readable, and rendered to JSON; `--check` fails when a rendered file
differs (make test runs the policy tests, which compare the files too).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PACKAGED = REPO / "src" / "instantstart" / "data" / "iam" / "control-plane-policy.json"
DEPLOY = REPO / "deploy" / "iam" / "control-plane-policy.json"
BOUNDARY_PACKAGED = PACKAGED.with_name("permissions-boundary.json")
BOUNDARY_DEPLOY = DEPLOY.with_name("permissions-boundary.json")

TAG = "instantstart:cluster-tag"
INSTALLATION_TAG = "instantstart:installation"
ROLES = "arn:aws:iam::*:role/instantstart-*"
# The permissions boundary every role the control plane creates or changes must carry (instantstart.aws.iam).
BOUNDARY_NAME = "InstantStartPermissionsBoundary"
BOUNDARY = f"arn:aws:iam::*:policy/{BOUNDARY_NAME}"
WITH_BOUNDARY = {"ArnLike": {"iam:PermissionsBoundary": BOUNDARY}}
OURS = {"StringLike": {f"aws:ResourceTag/{INSTALLATION_TAG}": "?*"}}
# The AWS managed policies the code attaches (services/base/iam.py, services/features/specs.py); a test keeps
# this list equal to the code's.
MANAGED_POLICIES = [
    "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
    "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy",
    "arn:aws:iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess",
    "arn:aws:iam::aws:policy/AmazonSageMakerHyperPodTrainingOperatorAccess",
]
# What a role the control plane makes may ever do (the boundary): the services its roles' builders and the
# managed policies above use. IAM writes, Organizations and account settings are never inside it.
BOUNDARY_SERVICES = [
    "acm", "aps", "autoscaling", "cloudwatch", "ec2", "ecr", "eks", "eks-auth", "elasticloadbalancing", "fsx",
    "kms", "logs", "s3", "sagemaker", "sagemaker-mlflow", "ssmmessages",
]
# grafana.amazonaws.com: the observability feature's Grafana workspace role (issue 19 item 4).
PASSED_TO = ["eks.amazonaws.com", "grafana.amazonaws.com", "pods.eks.amazonaws.com", "sagemaker.amazonaws.com"]
EC2_TAGGED_CREATES = [
    "ec2:AllocateAddress",
    "ec2:CreateInternetGateway",
    "ec2:CreateNatGateway",
    "ec2:CreateRouteTable",
    "ec2:CreateSecurityGroup",
    "ec2:CreateSubnet",
    "ec2:CreateVpc",
    "ec2:CreateVpcEndpoint",
]


def statement(
    sid: str, actions: list[str], resources: list[str], condition: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One Allow statement."""
    out: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": sorted(actions), "Resource": resources}
    if condition:
        out["Condition"] = condition
    return out


def deny(sid: str, actions: list[str], resources: list[str]) -> dict[str, Any]:
    """One Deny statement (wins over any Allow, this policy's or another one the operator attaches)."""
    return {"Sid": sid, "Effect": "Deny", "Action": sorted(actions), "Resource": resources}


def boundary() -> dict[str, Any]:
    """The permissions boundary policy: the most any role the control plane creates can ever be allowed."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            statement("WorkloadServices", [f"{service}:*" for service in BOUNDARY_SERVICES], ["*"]),
            # Reading IAM, passing roles and AWS's own service-linked roles (HyperPod inference, FSx) stay inside.
            statement("IamReadAndServiceLinkedRoles",
                      ["iam:CreateServiceLinkedRole", "iam:Get*", "iam:List*", "iam:PassRole"], ["*"]),
            # Never inside the boundary, whatever a role's own policies say: changing IAM or assuming other roles.
            deny("NoEscalation", ["account:*", "iam:Add*", "iam:Attach*", "iam:CreateAccessKey",
                                  "iam:CreateLoginProfile", "iam:CreatePolicy*", "iam:CreateRole", "iam:CreateUser",
                                  "iam:Delete*",
                                  "iam:Detach*", "iam:Put*", "iam:Set*", "iam:Tag*", "iam:Untag*", "iam:Update*",
                                  "organizations:*", "sts:*"], ["*"]),
        ],
    }


def policy() -> dict[str, Any]:
    """The control-plane policy document."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            statement(
                "LookupsRead",
                [
                    "cloudwatch:DescribeAlarms",
                    "sagemaker:ListClusterSchedulerConfigs",
                    "ec2:DescribeAddresses",
                    "ec2:DescribeAvailabilityZones",
                    "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInternetGateways",
                    "ec2:DescribeNatGateways",
                    "ec2:DescribeRouteTables",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeVpcAttribute",
                    "ec2:DescribeVpcEndpoints",
                    "ec2:DescribeVpcs",
                    "aps:ListWorkspaces",
                    "eks:DescribeAddonVersions",
                    "elasticloadbalancing:DescribeLoadBalancers",
                    "fsx:DescribeFileSystems",
                    "iam:ListOpenIDConnectProviders",
                    "iam:SimulatePrincipalPolicy",
                    "sagemaker:ListClusters",
                    "servicequotas:ListServiceQuotas",
                ],
                ["*"],
            ),
            statement(
                "NetworkCreateTagged",
                EC2_TAGGED_CREATES,
                ["*"],
                {"StringLike": {f"aws:RequestTag/{TAG}": "?*"}},
            ),
            statement(
                "NetworkTagOnCreateTagged",
                ["ec2:CreateTags"],
                ["*"],
                {"StringEquals": {"ec2:CreateAction": [a.split(":")[1] for a in EC2_TAGGED_CREATES]}},
            ),
            # Routes go only into route tables, public addresses only onto subnets, that the control plane made
            # (it finds and creates them by the cluster tag, in new and reused VPCs alike).
            statement(
                "NetworkWireTagged",
                ["ec2:CreateRoute", "ec2:ModifySubnetAttribute"],
                ["arn:aws:ec2:*:*:route-table/*", "arn:aws:ec2:*:*:subnet/*"],
                {"StringLike": {f"aws:ResourceTag/{TAG}": "?*"}},
            ),
            # Ingress rules only into security groups, and route tables onto S3 gateway endpoints, that carry the
            # cluster tag (issue 26 item 4): an adopted FSx file system's group or a reused VPC's endpoint that is
            # the operator's is left to the operator (fsx_adopt names the commands; network makes its own endpoint).
            # ModifyVpcEndpoint's AddRouteTableIds also authorizes each route table (ours, tagged).
            statement(
                "NetworkRulesTagged",
                ["ec2:AuthorizeSecurityGroupIngress", "ec2:ModifyVpcEndpoint"],
                ["arn:aws:ec2:*:*:security-group/*", "arn:aws:ec2:*:*:vpc-endpoint/*",
                 "arn:aws:ec2:*:*:route-table/*"],
                {"StringLike": {f"aws:ResourceTag/{TAG}": "?*"}},
            ),
            # Associations, attachments and VPC attributes name the reused network's own resources.
            statement(
                "NetworkWireUnscoped",
                ["ec2:AssociateRouteTable", "ec2:AttachInternetGateway", "ec2:ModifyVpcAttribute"],
                ["*"],
            ),
            statement(
                "NetworkDeleteTagged",
                [
                    "ec2:DeleteInternetGateway",
                    "ec2:DeleteNatGateway",
                    "ec2:DeleteRouteTable",
                    "ec2:DeleteSecurityGroup",
                    "ec2:DeleteSubnet",
                    "ec2:DeleteVpc",
                    "ec2:DeleteVpcEndpoints",
                    "ec2:DetachInternetGateway",
                    "ec2:DisassociateRouteTable",
                    "ec2:ReleaseAddress",
                ],
                ["*"],
                {"StringLike": {f"aws:ResourceTag/{TAG}": "?*"}},
            ),
            statement(
                "EksClusters",
                [
                    "eks:CreateAddon",
                    "eks:CreateCluster",
                    "eks:CreatePodIdentityAssociation",
                    "eks:DeleteAddon",
                    "eks:DeleteNodegroup",
                    "eks:DeletePodIdentityAssociation",
                    "eks:DescribeAddon",
                    "eks:DescribeCluster",
                    "eks:DescribeNodegroup",
                    "eks:DescribePodIdentityAssociation",
                    "eks:DescribeUpdate",
                    "eks:ListAccessEntries",
                    "eks:ListAddons",
                    "eks:ListAssociatedAccessPolicies",
                    "eks:ListNodegroups",
                    "eks:ListPodIdentityAssociations",
                    "eks:TagResource",
                    "eks:UpdateAddon",
                    "eks:UpdateClusterVersion",
                    "eks:UpdateNodegroupConfig",
                ],
                [
                    "arn:aws:eks:*:*:cluster/*",
                    "arn:aws:eks:*:*:addon/*/*/*",
                    "arn:aws:eks:*:*:nodegroup/*/*/*",
                    "arn:aws:eks:*:*:podidentityassociation/*/*",
                    "arn:aws:eks:*:*:access-entry/*/*/*/*/*",
                ],
            ),
            # Destructive calls only on clusters this control plane made (issue 26 item 4): an imported cluster (no
            # installation tag) is never deleted, nor its nodes deleted or replaced.
            statement("EksDeleteTagged", ["eks:DeleteCluster"], ["arn:aws:eks:*:*:cluster/*"], OURS),
            statement(
                "HyperPodDestructiveTagged",
                ["sagemaker:BatchDeleteClusterNodes", "sagemaker:BatchReplaceClusterNodes", "sagemaker:DeleteCluster"],
                ["arn:aws:sagemaker:*:*:cluster/*"],
                OURS,
            ),
            statement(
                "HyperPodClusters",
                [
                    "sagemaker:AddTags",
                    "sagemaker:BatchRebootClusterNodes",
                    "sagemaker:CreateCluster",
                    "sagemaker:DescribeCluster",
                    "sagemaker:DescribeClusterNode",
                    "sagemaker:ListClusterEvents",
                    "sagemaker:ListClusterNodes",
                    "sagemaker:ListTags",
                    "sagemaker:UpdateCluster",
                    "sagemaker:UpdateClusterSoftware",
                ],
                ["arn:aws:sagemaker:*:*:cluster/*"],
            ),
            # Task governance (teams): the cluster's scheduler config and one compute quota per team.
            statement(
                "TaskGovernance",
                [
                    "sagemaker:CreateClusterSchedulerConfig",
                    "sagemaker:CreateComputeQuota",
                    "sagemaker:DeleteComputeQuota",
                    "sagemaker:DescribeClusterSchedulerConfig",
                    "sagemaker:DescribeComputeQuota",
                    "sagemaker:UpdateClusterSchedulerConfig",
                    "sagemaker:UpdateComputeQuota",
                ],
                [
                    "arn:aws:sagemaker:*:*:cluster-scheduler-config/*",
                    "arn:aws:sagemaker:*:*:compute-quota/*",
                    "arn:aws:sagemaker:*:*:cluster/*",
                ],
            ),
            statement("TrainingPlans", ["sagemaker:DescribeTrainingPlan"], ["arn:aws:sagemaker:*:*:training-plan/*"]),
            statement("InvokeInferenceEndpoints", ["sagemaker:InvokeEndpoint"], ["arn:aws:sagemaker:*:*:endpoint/*"]),
            # A JumpStart model's supported instance types, read before its JumpStartModel is applied (public hub only).
            statement("JumpStartPublicHubRead", ["sagemaker:DescribeHubContent"],
                      ["arn:aws:sagemaker:*:aws:hub-content/SageMakerPublicHub/Model/*"]),
            statement(
                "OwnRolesRead",
                ["iam:GetRole", "iam:GetRolePolicy", "iam:ListAttachedRolePolicies", "iam:ListRolePolicies"],
                [ROLES],
            ),
            # Removing permissions never makes anything more powerful; DeleteRole needs its policies gone first.
            statement(
                "OwnRolesShrink",
                ["iam:DeleteRole", "iam:DeleteRolePolicy", "iam:DetachRolePolicy", "iam:TagRole"],
                [ROLES],
            ),
            # Creating a role or adding to its permissions only with the boundary on it (issue 26 item 3): a role
            # the control plane makes can never do more than the boundary allows.
            statement("OwnRolesBounded", ["iam:CreateRole", "iam:PutRolePolicy"], [ROLES], WITH_BOUNDARY),
            # Only the AWS managed policies the code attaches (EKS cluster, HyperPod instance, operator add-ons).
            statement(
                "OwnRolesManagedPolicies",
                ["iam:AttachRolePolicy"],
                [ROLES],
                {**WITH_BOUNDARY, "ArnEquals": {"iam:PolicyARN": MANAGED_POLICIES}},
            ),
            # A trust policy changes only on a role this control plane made (it carries the installation tag).
            statement("OwnRolesTrust", ["iam:UpdateAssumeRolePolicy"], [ROLES], OURS),
            # instantstart doctor checks that the operator created the boundary.
            statement("BoundaryRead", ["iam:GetPolicy"], [BOUNDARY]),
            deny(
                "NoBoundaryChanges",
                ["iam:DeleteRolePermissionsBoundary", "iam:PutRolePermissionsBoundary"],
                ["arn:aws:iam::*:role/*"],
            ),
            deny(
                "NoBoundaryPolicyChanges",
                ["iam:CreatePolicyVersion", "iam:DeletePolicy", "iam:DeletePolicyVersion",
                 "iam:SetDefaultPolicyVersion"],
                [BOUNDARY],
            ),
            statement(
                "PassOwnRoles",
                ["iam:PassRole"],
                [ROLES],
                {"StringEquals": {"iam:PassedToService": PASSED_TO}},
            ),
            statement(
                "HyperPodServiceLinkedRole",
                ["iam:CreateServiceLinkedRole", "iam:GetRole"],
                ["arn:aws:iam::*:role/aws-service-role/hyperpod.sagemaker.amazonaws.com/AWSServiceRoleForSageMakerHyperPod"],
            ),
            # FSx for Lustre volumes (fsx_storage_create): created and deleted only with the cluster tag; FSx
            # makes its service-linked role on first use.
            statement(
                "FsxCreateTagged",
                ["fsx:CreateFileSystem", "fsx:TagResource"],
                ["*"],
                {"StringLike": {f"aws:RequestTag/{TAG}": "?*"}},
            ),
            statement(
                "FsxDeleteTagged",
                ["fsx:DeleteFileSystem"],
                ["*"],
                {"StringLike": {f"aws:ResourceTag/{TAG}": "?*"}},
            ),
            # Storage (issue 14): adopting an existing FSx file system reads its network interfaces' security groups
            # (to check Lustre reachability from the nodes).
            statement("FsxAdoptNetworkRead", ["ec2:DescribeNetworkInterfaces"], ["*"]),
            statement(
                "FsxServiceLinkedRole",
                ["iam:CreateServiceLinkedRole"],
                ["arn:aws:iam::*:role/aws-service-role/fsx.amazonaws.com/*"],
            ),
            statement(
                "ClusterOidcProviders",
                [
                    "iam:CreateOpenIDConnectProvider",
                    "iam:DeleteOpenIDConnectProvider",
                    "iam:GetOpenIDConnectProvider",
                    "iam:TagOpenIDConnectProvider",
                ],
                ["arn:aws:iam::*:oidc-provider/oidc.eks.*.amazonaws.com/id/*"],
            ),
            statement(
                "ProjectBuckets",
                [
                    "s3:CreateBucket",
                    "s3:DeleteBucket",
                    "s3:GetBucketLocation",
                    "s3:GetBucketTagging",
                    "s3:ListBucket",
                    "s3:PutBucketTagging",
                ],
                ["arn:aws:s3:::instantstart-*"],
            ),
            statement(
                "ProjectObjects", ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"], ["arn:aws:s3:::instantstart-*/*"]
            ),
            # The observability feature's Amazon Managed Service for Prometheus workspace (one per cluster).
            statement(
                "MetricsWorkspaces",
                ["aps:CreateWorkspace", "aps:DeleteWorkspace", "aps:DescribeWorkspace", "aps:TagResource"],
                ["arn:aws:aps:*:*:workspace/*"],
            ),
            # Monitoring (issue 19): the GPU-utilisation view reads the observability workspace's PromQL API
            # (/api/v1/query and query_range), monitoring_gpu_utilization.
            statement("MetricsQueries", ["aps:QueryMetrics"], ["arn:aws:aps:*:*:workspace/*"]),
            # Observability Grafana (issue 19 item 4): the feature's optional Amazon Managed Grafana workspace, adopted
            # by id (DescribeWorkspace) or created tagged with the cluster tag, found again by listing (ListWorkspaces
            # cannot be scoped to a workspace), deleted when InstantStart created it.
            statement(
                "GrafanaWorkspaces",
                ["grafana:CreateWorkspace", "grafana:DeleteWorkspace", "grafana:DescribeWorkspace",
                 "grafana:TagResource"],
                ["arn:aws:grafana:*:*:/workspaces/*"],
            ),
            statement("GrafanaWorkspacesListUnscoped", ["grafana:ListWorkspaces"], ["*"]),
            # MLflow (mlflow_configure, training_history): the cluster's SageMaker managed MLflow tracking server
            # (created or attached, tagged, deleted with the cluster) and its REST API for reading runs.
            statement(
                "MlflowTrackingServers",
                [
                    "sagemaker:AddTags",
                    "sagemaker:CreateMlflowTrackingServer",
                    "sagemaker:DeleteMlflowTrackingServer",
                    "sagemaker:DescribeMlflowTrackingServer",
                    "sagemaker:ListTags",
                    "sagemaker-mlflow:GetExperimentByName",
                    "sagemaker-mlflow:GetMetricHistory",
                    "sagemaker-mlflow:SearchExperiments",
                    "sagemaker-mlflow:SearchRuns",
                ],
                ["arn:aws:sagemaker:*:*:mlflow-tracking-server/*"],
            ),
        ],
    }


def rendered() -> str:
    """The policy as the shipped JSON text."""
    return json.dumps(policy(), indent=2) + "\n"


def rendered_files() -> dict[Path, str]:
    """Every file this script writes, with its text."""
    boundary_text = json.dumps(boundary(), indent=2) + "\n"
    text = rendered()
    return {PACKAGED: text, DEPLOY: text, BOUNDARY_PACKAGED: boundary_text, BOUNDARY_DEPLOY: boundary_text}


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, compare) the policy files."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when a file differs instead of writing it")
    args = parser.parse_args(argv)
    files = rendered_files()
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO)} is out of date: run python scripts/policy_source.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
