"""Every IAM document the control plane writes: trust policies (confused-deputy conditions) and inline policies
scoped to one cluster's resources and its own prefixes of the project bucket. Pure: no AWS calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VERSION = "2012-10-17"

# Project bucket layout: data roles (nodes, the S3 CSI driver) may write only under their cluster's data prefix;
# lifecycle scripts live under a prefix no role can write: every identity policy here ends with an explicit Deny
# on `*/lifecycle/*` writes in any bucket (the execution role may only read its own scripts).
DATA_ROOT = "clusters/"
LIFECYCLE_ROOT = "lifecycle/"
IRSA_AUDIENCE = "sts.amazonaws.com"


def data_prefix(cluster_tag: str) -> str:
    """The prefix of the bucket a cluster's workloads read and write (the default claim mounts it)."""
    return f"{DATA_ROOT}{cluster_tag}/data/"


def checkpoint_prefix(cluster_tag: str) -> str:
    """The prefix a cluster's managed tiered checkpointing writes (its own: no cluster reads another's)."""
    return f"{DATA_ROOT}{cluster_tag}/checkpoints/"


def lifecycle_prefix(cluster_tag: str) -> str:
    """The prefix holding a cluster's lifecycle scripts (written by the control plane only)."""
    return f"{LIFECYCLE_ROOT}{cluster_tag}/"


@dataclass(frozen=True)
class Scope:
    """What a cluster's policies may touch: account, Region, cluster tag, EKS cluster, project bucket, VPC."""

    account: str
    region: str
    cluster_tag: str
    eks_cluster: str
    bucket: str
    vpc_id: str | None = None

    @property
    def eks_cluster_arn(self) -> str:
        """ARN of the cluster's EKS control plane."""
        return f"arn:aws:eks:{self.region}:{self.account}:cluster/{self.eks_cluster}"

    @property
    def vpc_arn(self) -> str:
        """ARN of the cluster's VPC; `*` in the VPC part only when the VPC is not known yet."""
        return f"arn:aws:ec2:{self.region}:{self.account}:vpc/{self.vpc_id or '*'}"


def _doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": VERSION, "Statement": list(statements)}


# Writes that could change a lifecycle script (nodes run it as root on every launch, replacement and recovery).
LIFECYCLE_WRITES = [
    "s3:PutObject",
    "s3:PutObjectAcl",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:RestoreObject",
]
LIFECYCLE_DENY_SID = "DenyLifecycleScriptWrites"


def lifecycle_deny() -> dict[str, Any]:
    """An explicit Deny on writing any `lifecycle/` key of any bucket (at the root or below it): it wins over
    every Allow of the role (a claim's `bucket/*`, a managed policy), so no workload reaches a lifecycle script."""
    return {
        "Sid": LIFECYCLE_DENY_SID,
        "Effect": "Deny",
        "Action": list(LIFECYCLE_WRITES),
        "Resource": [f"arn:aws:s3:::*/{LIFECYCLE_ROOT}*"],
    }


def _policy(*statements: dict[str, Any]) -> dict[str, Any]:
    """An identity policy: the statements, then the lifecycle Deny (every role InstantStart writes carries it)."""
    return _doc(*statements, lifecycle_deny())


def lifecycle_guard_policy() -> dict[str, Any]:
    """The inline policy of a role that otherwise has only managed policies: the lifecycle Deny alone."""
    return _policy()


def service_trust(service: str, account: str, source_arn: str) -> dict[str, Any]:
    """Trust for an AWS service principal, only on behalf of this account's resource `source_arn` (ArnLike)."""
    return _doc(
        {
            "Effect": "Allow",
            "Principal": {"Service": service},
            "Action": "sts:AssumeRole",
            "Condition": {
                "StringEquals": {"aws:SourceAccount": account},
                "ArnLike": {"aws:SourceArn": source_arn},
            },
        }
    )


def eks_cluster_trust(scope: Scope) -> dict[str, Any]:
    """Trust of the EKS cluster role: eks.amazonaws.com acting for this cluster only."""
    return service_trust("eks.amazonaws.com", scope.account, scope.eks_cluster_arn)


def execution_trust(scope: Scope) -> dict[str, Any]:
    """Trust of the HyperPod execution role: SageMaker acting for a cluster of this account and Region."""
    return service_trust(
        "sagemaker.amazonaws.com", scope.account, f"arn:aws:sagemaker:{scope.region}:{scope.account}:cluster/*"
    )


def autoscaling_trust(account: str, cluster_arn: str) -> dict[str, Any]:
    """Trust of the Karpenter autoscaling role: HyperPod acting for this one cluster."""
    return service_trust("hyperpod.sagemaker.amazonaws.com", account, cluster_arn)


def pod_identity_trust(
    account: str, eks_cluster: str, namespace: str | None = None, service_account: str | None = None
) -> dict[str, Any]:
    """Trust of a role assumed through EKS Pod Identity: this account, this EKS cluster (session tags) and,
    when given, one namespace/service account."""
    equals: dict[str, Any] = {"aws:SourceAccount": account, "aws:RequestTag/eks-cluster-name": eks_cluster}
    if namespace:
        equals["aws:RequestTag/kubernetes-namespace"] = namespace
    if service_account:
        equals["aws:RequestTag/kubernetes-service-account"] = service_account
    return _doc(
        {
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": {"StringEquals": equals},
        }
    )


def _data_statements(scope: Scope, sid: str, write_actions: list[str]) -> list[dict[str, Any]]:
    bucket_arn = f"arn:aws:s3:::{scope.bucket}"
    prefix = data_prefix(scope.cluster_tag)
    return [
        {
            "Sid": f"{sid}List",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [bucket_arn],
            "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}},
        },
        {
            "Sid": f"{sid}Objects",
            "Effect": "Allow",
            "Action": ["s3:GetObject", *write_actions],
            "Resource": [f"{bucket_arn}/{prefix}*"],
        },
    ]


def execution_inline_policy(scope: Scope) -> dict[str, Any]:
    """What HyperPod nodes need beyond the managed instance policy: their cluster's data prefix, read-only
    lifecycle scripts, the VPC CNI's ENI management inside the cluster's VPC, image pulls, Pod Identity (the
    node's Pod Identity Agent). Nothing on a node calls eks:DescribeCluster (HyperPod's service-linked role does)."""
    return _policy(
        *_data_statements(scope, "ClusterData", ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]),
        {
            "Sid": "LifecycleScriptsReadOnly",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": [f"arn:aws:s3:::{scope.bucket}/{lifecycle_prefix(scope.cluster_tag)}*"],
        },
        *_vpc_cni_statements(scope),
        {
            # Pulling is these three (AmazonEC2ContainerRegistryPullOnly); BatchCheckLayerAvailability is a push.
            "Sid": "ImagePull",
            "Effect": "Allow",
            "Action": ["ecr:GetAuthorizationToken", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            "Resource": "*",
        },
        {
            "Sid": "PodIdentity",
            "Effect": "Allow",
            "Action": ["eks-auth:AssumeRoleForPodIdentity"],
            "Resource": [scope.eks_cluster_arn],
        },
    )


def _vpc_cni_statements(scope: Scope) -> list[dict[str, Any]]:
    """The VPC CNI's reads, and its ENI changes (and their tags) inside the cluster's VPC only."""
    net = f"arn:aws:ec2:{scope.region}:{scope.account}"
    in_vpc = {"ArnEquals": {"ec2:Vpc": scope.vpc_arn}}
    return [
        {
            "Sid": "VpcCniRead",
            "Effect": "Allow",
            "Action": [
                "ec2:DescribeInstances",
                "ec2:DescribeTags",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeSubnets",
            ],
            "Resource": "*",
        },
        {
            "Sid": "VpcCniEnisInClusterVpc",
            "Effect": "Allow",
            "Action": [
                "ec2:AssignPrivateIpAddresses",
                "ec2:AttachNetworkInterface",
                "ec2:CreateNetworkInterface",
                "ec2:DeleteNetworkInterface",
                "ec2:DetachNetworkInterface",
                "ec2:ModifyNetworkInterfaceAttribute",
                "ec2:UnassignPrivateIpAddresses",
            ],
            "Resource": [
                f"{net}:network-interface/*",
                f"{net}:subnet/*",
                f"{net}:security-group/*",
                f"{net}:instance/*",
            ],
            "Condition": in_vpc,
        },
        {
            "Sid": "VpcCniTagEnis",
            "Effect": "Allow",
            "Action": ["ec2:CreateTags"],
            "Resource": [f"{net}:network-interface/*"],
            "Condition": in_vpc,
        },
    ]


MOUNT_WRITES = ["s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"]


def claim_grants(project: str | None, storage: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(bucket, prefix) of every recorded S3 claim of a cluster (`storage`: claim name → record) on a bucket other
    than its `project` bucket: what the S3 CSI role must reach beyond the cluster's data prefix, in a stable order."""
    grants = {
        (str(c["bucketName"]), str(c.get("prefix") or ""))
        for c in storage.values()
        if c.get("bucketName") and c["bucketName"] != project
    }
    return sorted(grants)


def csi_data_policy(scope: Scope, grants: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """Mountpoint for S3's permissions, limited to the cluster's data prefix (never the lifecycle scripts), plus
    exactly the bucket/prefix of each claim on another bucket (`grants`, see claim_grants)."""
    statements = _data_statements(scope, "Mountpoint", MOUNT_WRITES)
    for index, (bucket, prefix) in enumerate(grants or []):
        listing: dict[str, Any] = {
            "Sid": f"Claim{index}List",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [f"arn:aws:s3:::{bucket}"],
        }
        if prefix:
            listing["Condition"] = {"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}}
        objects = {
            "Sid": f"Claim{index}Objects",
            "Effect": "Allow",
            "Action": ["s3:GetObject", *MOUNT_WRITES],
            "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*"],
        }
        statements += [listing, objects]
    return _policy(*statements)


def autoscaling_policy(region: str, cluster_arn: str) -> dict[str, Any]:
    """What HyperPod needs to add and remove nodes of this one cluster for Karpenter."""
    return _policy(
        {
            "Sid": "HyperPodAutoscalingThisCluster",
            "Effect": "Allow",
            "Action": ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
            "Resource": [cluster_arn],
        },
        {
            "Sid": "EncryptedVolumes",
            "Effect": "Allow",
            "Action": ["kms:CreateGrant", "kms:DescribeKey"],
            "Resource": "*",
            "Condition": {"StringLike": {"kms:ViaService": f"sagemaker.{region}.amazonaws.com"}},
        },
    )


def irsa_trust(
    provider_arn: str, issuer: str, namespace: str, service_account: str, services: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Trust of an IRSA role: web identity from exactly this OIDC provider, for exactly
    system:serviceaccount:<namespace>:<serviceAccount> with audience sts.amazonaws.com; extra service principals
    only on behalf of the provider's account."""
    host = issuer.removeprefix("https://")
    account = provider_arn.split(":")[4]
    statements: list[dict[str, Any]] = [
        {
            "Effect": "Allow",
            "Principal": {"Federated": provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {
                "StringEquals": {
                    f"{host}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                    f"{host}:aud": IRSA_AUDIENCE,
                }
            },
        }
    ]
    if services:
        statements.append(
            {
                "Effect": "Allow",
                "Principal": {"Service": list(services)},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {"aws:SourceArn": f"arn:aws:sagemaker:*:{account}:*"},
                },
            }
        )
    return _doc(*statements)



def _prefix_statements(sid: str, bucket: str, prefix: str, list_actions: list[str]) -> list[dict[str, Any]]:
    """Read/write/delete of the objects under `prefix` (`<sid>Objects`) and listing only that prefix (`<sid>List`)."""
    return [
        {
            "Sid": f"{sid}Objects",
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*"],
        },
        {
            "Sid": f"{sid}List",
            "Effect": "Allow",
            "Action": list_actions,
            "Resource": [f"arn:aws:s3:::{bucket}"],
            "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        },
    ]


def checkpoint_policy(bucket: str, prefix: str) -> dict[str, Any]:
    """Managed tiered checkpointing: S3 read/write on the checkpoint prefix only, plus CloudWatch metrics."""
    return _policy(
        *_prefix_statements("Checkpoint", bucket, prefix, ["s3:ListBucket"]),
        {"Sid": "CheckpointMetrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": "*"},
    )
