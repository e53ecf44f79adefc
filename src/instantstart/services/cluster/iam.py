"""IAM: least-privilege roles for EKS and the HyperPod execution role, OIDC providers, caller identity."""

from __future__ import annotations

import json
from typing import Any

from instantstart.aws import iam as iam_api
from instantstart.aws import identity
from instantstart.aws.clients import AwsClients
from instantstart.services.core.ledger import aws_tags, record
from instantstart.store.db import Database

EKS_CLUSTER_POLICY = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"
HYPERPOD_INSTANCE_POLICY = "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"
OIDC_THUMBPRINT = "9e99a48a9960b14926bb7f3b02e22da2b0ab7280"


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
    aws: AwsClients,
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
    arn = iam_api.role_arn(aws, region, name)
    if arn is None:
        arn = iam_api.create_role(
            aws,
            region,
            name=name,
            trust_policy=trust(service),
            description=description,
            tags=aws_tags(cluster_tag, operation_id, name),
        )
        record(
            db,
            cluster_tag=cluster_tag,
            operation_id=operation_id,
            resource_type="iam:role",
            resource_id=name,
            region=region,
            details={"arn": arn},
        )
    attached = iam_api.attached_policies(aws, region, name)
    for policy in managed:
        if policy not in attached:
            iam_api.attach_policy(aws, region, name, policy)
    if inline is not None and iam_api.inline_policy(aws, region, name) != inline:
        iam_api.put_inline_policy(aws, region, name, inline)
    return arn


def caller_principal(aws: AwsClients, region: str) -> str:
    """The IAM principal of the control plane: an assumed-role session canonicalised to its role ARN."""
    arn = identity.caller_arn(aws, region)
    if ":assumed-role/" in arn:
        account = arn.split(":")[4]
        role = arn.split(":assumed-role/")[1].split("/")[0]
        return f"arn:aws:iam::{account}:role/{role}"
    return arn


def ensure_oidc_provider(
    aws: AwsClients, db: Database, *, cluster_tag: str, operation_id: str, region: str, issuer: str
) -> str:
    """The IAM OIDC provider of the EKS cluster's issuer (for IRSA); returns its ARN."""
    found = iam_api.oidc_provider_arn(aws, region, issuer)
    if found is not None:
        return found
    arn = iam_api.create_oidc_provider(
        aws, region, issuer=issuer, thumbprint=OIDC_THUMBPRINT, tags=aws_tags(cluster_tag, operation_id)
    )
    record(
        db,
        cluster_tag=cluster_tag,
        operation_id=operation_id,
        resource_type="iam:oidc-provider",
        resource_id=arn,
        region=region,
    )
    return arn
