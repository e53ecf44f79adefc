"""Writes the control plane's IAM policy (data/iam + deploy/iam) and embeds it in the management template.

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

TAG = "instantstart:cluster-tag"
ROLES = "arn:aws:iam::*:role/instantstart-*"
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


def policy() -> dict[str, Any]:
    """The control-plane policy document."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            statement(
                "LookupsRead",
                [
                    "ec2:DescribeAddresses",
                    "ec2:DescribeAvailabilityZones",
                    "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInternetGateways",
                    "ec2:DescribeNatGateways",
                    "ec2:DescribeRouteTables",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSubnets",
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
            # Routes, associations, attributes and ingress rules carry no tags, and apply to reused networks too.
            statement(
                "NetworkWireUnscoped",
                [
                    "ec2:AssociateRouteTable",
                    "ec2:AttachInternetGateway",
                    "ec2:AuthorizeSecurityGroupIngress",
                    "ec2:CreateRoute",
                    "ec2:ModifySubnetAttribute",
                    "ec2:ModifyVpcAttribute",
                    "ec2:ModifyVpcEndpoint",
                ],
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
                    "eks:DeleteCluster",
                    "eks:DeleteNodegroup",
                    "eks:DeletePodIdentityAssociation",
                    "eks:DescribeAddon",
                    "eks:DescribeCluster",
                    "eks:DescribeNodegroup",
                    "eks:DescribePodIdentityAssociation",
                    "eks:ListAccessEntries",
                    "eks:ListAddons",
                    "eks:ListAssociatedAccessPolicies",
                    "eks:ListNodegroups",
                    "eks:ListPodIdentityAssociations",
                    "eks:TagResource",
                    "eks:UpdateAddon",
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
            statement(
                "HyperPodClusters",
                [
                    "sagemaker:AddTags",
                    "sagemaker:BatchDeleteClusterNodes",
                    "sagemaker:BatchRebootClusterNodes",
                    "sagemaker:BatchReplaceClusterNodes",
                    "sagemaker:CreateCluster",
                    "sagemaker:DeleteCluster",
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
            statement("TrainingPlans", ["sagemaker:DescribeTrainingPlan"], ["arn:aws:sagemaker:*:*:training-plan/*"]),
            statement("InvokeInferenceEndpoints", ["sagemaker:InvokeEndpoint"], ["arn:aws:sagemaker:*:*:endpoint/*"]),
            statement(
                "OwnRoles",
                [
                    "iam:CreateRole",
                    "iam:DeleteRole",
                    "iam:DeleteRolePolicy",
                    "iam:GetRole",
                    "iam:GetRolePolicy",
                    "iam:ListAttachedRolePolicies",
                    "iam:ListRolePolicies",
                    "iam:PutRolePolicy",
                    "iam:TagRole",
                    "iam:UpdateAssumeRolePolicy",
                ],
                [ROLES],
            ),
            # Only AWS-managed policies are attached (EKS cluster, HyperPod instance, CSI drivers).
            statement(
                "OwnRolesManagedPolicies",
                ["iam:AttachRolePolicy", "iam:DetachRolePolicy"],
                [ROLES],
                {"ArnLike": {"iam:PolicyARN": "arn:aws:iam::aws:policy/*"}},
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


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, compare) the policy files."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when a file differs instead of writing it")
    args = parser.parse_args(argv)
    text = rendered()
    stale = [p for p in (PACKAGED, DEPLOY) if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO)} is out of date: run python scripts/policy_source.py", file=sys.stderr)
        return 1 if stale else 0
    for path in (PACKAGED, DEPLOY):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
