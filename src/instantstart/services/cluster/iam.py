"""IAM: least-privilege roles for EKS and the HyperPod execution role, OIDC providers, caller identity."""

from __future__ import annotations

import json
from typing import Any

from instantstart.aws import identity
from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import error_code, translate
from instantstart.services.core.ledger import aws_tags, record
from instantstart.store.db import Database

EKS_CLUSTER_POLICY = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"
HYPERPOD_INSTANCE_POLICY = "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"


def trust(service: str) -> str:
    """A trust policy for an AWS service principal."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


def execution_inline_policy(bucket: str) -> dict[str, Any]:
    """What HyperPod nodes need beyond the managed instance policy: S3 limited to the project bucket,
    the VPC CNI's ENI management, image pulls, and Pod Identity."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ProjectBucketOnly",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket", "s3:GetBucketLocation"],
                "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
            },
            {
                "Sid": "VpcCni",
                "Effect": "Allow",
                "Action": [
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:AttachNetworkInterface",
                    "ec2:CreateNetworkInterface",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DescribeInstances",
                    "ec2:DescribeTags",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeSubnets",
                    "ec2:DetachNetworkInterface",
                    "ec2:ModifyNetworkInterfaceAttribute",
                    "ec2:UnassignPrivateIpAddresses",
                    "ec2:CreateTags",
                ],
                "Resource": "*",
            },
            {
                "Sid": "ImagePull",
                "Effect": "Allow",
                "Action": [
                    "ecr:GetAuthorizationToken",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                    "ecr:BatchCheckLayerAvailability",
                ],
                "Resource": "*",
            },
            {
                "Sid": "PodIdentityAndCluster",
                "Effect": "Allow",
                "Action": ["eks-auth:AssumeRoleForPodIdentity", "eks:DescribeCluster"],
                "Resource": "*",
            },
        ],
    }


def ensure_role(
    iam: Any,
    db: Database,
    *,
    cluster_tag: str,
    operation_id: str,
    region: str,
    name: str,
    service: str,
    managed: list[str],
    inline: dict[str, Any] | None = None,
    description: str = "",
) -> str:
    """A role with exactly the given trust, managed policies and inline policy; returns its ARN."""
    try:
        try:
            arn = iam.get_role(RoleName=name)["Role"]["Arn"]
        except Exception as exc:
            if error_code(exc) != "NoSuchEntity":
                raise
            arn = iam.create_role(
                RoleName=name,
                AssumeRolePolicyDocument=trust(service),
                Description=description,
                Tags=aws_tags(cluster_tag, operation_id, name),
            )["Role"]["Arn"]
            record(
                db,
                cluster_tag=cluster_tag,
                operation_id=operation_id,
                resource_type="iam:role",
                resource_id=name,
                region=region,
                details={"arn": arn},
            )
        attached = {p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]}
        for policy in managed:
            if policy not in attached:
                iam.attach_role_policy(RoleName=name, PolicyArn=policy)
        if inline is not None:
            iam.put_role_policy(RoleName=name, PolicyName="instantstart", PolicyDocument=json.dumps(inline))
        return str(arn)
    except Exception as exc:
        raise translate(exc, f"ensure IAM role {name}") from exc


def caller_principal(aws: AwsClients, region: str) -> str:
    """The IAM principal of the control plane: an assumed-role session canonicalised to its role ARN."""
    arn = identity.caller_arn(aws, region)
    if ":assumed-role/" in arn:
        account = arn.split(":")[4]
        role = arn.split(":assumed-role/")[1].split("/")[0]
        return f"arn:aws:iam::{account}:role/{role}"
    return arn


def ensure_oidc_provider(
    iam: Any, db: Database, *, cluster_tag: str, operation_id: str, region: str, issuer: str
) -> str:
    """The IAM OIDC provider of the EKS cluster's issuer (for IRSA); returns its ARN."""
    host = issuer.removeprefix("https://")
    try:
        for provider in iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]:
            if provider["Arn"].endswith("/" + host):
                return str(provider["Arn"])
        arn = iam.create_open_id_connect_provider(
            Url=issuer,
            ClientIDList=["sts.amazonaws.com"],
            ThumbprintList=["9e99a48a9960b14926bb7f3b02e22da2b0ab7280"],
            Tags=aws_tags(cluster_tag, operation_id),
        )["OpenIDConnectProviderArn"]
    except Exception as exc:
        raise translate(exc, "register the cluster's OIDC provider") from exc
    record(
        db,
        cluster_tag=cluster_tag,
        operation_id=operation_id,
        resource_type="iam:oidc-provider",
        resource_id=str(arn),
        region=region,
    )
    return str(arn)
