"""What a HyperPod node launch looks up in the account: a free private IP, the lifecycle script in S3 and the
images of its system pods in ECR, both with the credentials of its instance group's execution role."""

from __future__ import annotations

import ipaddress

from hyperpod_twin.role_usage import backend_documents, use

from .context import AwsContext
from .hyperpod_model import InstanceGroup

# The EKS add-on images every node pulls from Amazon EKS's ECR registry before it joins (the VPC CNI and
# kube-proxy DaemonSets), with the node's role: ecr:GetAuthorizationToken, then the image manifest and layers.
EKS_IMAGE_ACCOUNT = "602401143452"
BOOT_IMAGES = ("amazon-k8s-cni-init", "amazon-k8s-cni", "eks/kube-proxy")
PULL_ACTIONS = ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")


def free_private_ip(ctx: AwsContext, region: str, subnet_id: str, used: set[str]) -> str:
    """The first address of the subnet (from .10) no twin node uses."""
    try:
        cidr = ipaddress.ip_network(ctx.ec2(region).get_subnet(subnet_id).cidr_block)
    except Exception:
        cidr = ipaddress.ip_network("10.0.0.0/16")
    for offset in range(10, cidr.num_addresses - 1):
        ip = str(cidr.network_address + offset)
        if ip not in used:
            return ip
    return str(cidr.network_address + 4)


def lifecycle_script_problem(ctx: AwsContext, group: InstanceGroup) -> str | None:
    """Why the group's OnCreate script cannot be fetched from S3 (None when it can, or none is set)."""
    lcc = group.spec.get("LifeCycleConfig") or {}
    uri, script = str(lcc.get("SourceS3Uri") or ""), str(lcc.get("OnCreate") or "")
    if not uri.startswith("s3://") or not script:
        return None
    from moto.s3.models import s3_backends

    bucket, _, prefix = uri[len("s3://") :].partition("/")
    key = f"{prefix.strip('/')}/{script}" if prefix.strip("/") else script
    where = f"s3://{bucket}/{key}"
    denied = node_denial(ctx, group, "s3:GetObject", f"arn:aws:s3:::{bucket}/{key}")
    if denied:
        return f"Lifecycle script {where} could not be downloaded: {denied}"
    try:
        found = s3_backends[ctx.account_id]["aws"].get_object(bucket, key)
    except Exception:
        found = None
    if found is None:
        return f"Lifecycle script {where} could not be downloaded: the object does not exist."
    return None


def node_denial(ctx: AwsContext, group: InstanceGroup, action: str, resource: str) -> str | None:
    """Why the group's execution role may not make this request (None: allowed, or the role is not in the twin's
    IAM, so nothing can be evaluated); the request is recorded as the role's use."""
    role = str(group.spec.get("ExecutionRole") or "")
    documents = backend_documents(ctx.iam(), role) if role else None
    if documents is None:
        return None
    decision = use(documents, role, action, resource)
    if decision == "Allow":
        return None
    return f"AccessDenied: {role} is not authorized to perform {action} on {resource} ({decision})"


def image_pull_problem(ctx: AwsContext, region: str, group: InstanceGroup) -> str | None:
    """Why a node of the group cannot pull the EKS add-on images it needs to join the cluster (None: it can)."""
    denied = node_denial(ctx, group, "ecr:GetAuthorizationToken", "*")
    for image in BOOT_IMAGES:
        repository = f"arn:aws:ecr:{region}:{EKS_IMAGE_ACCOUNT}:repository/{image}"
        for action in PULL_ACTIONS:
            denied = denied or node_denial(ctx, group, action, repository)
    if denied:
        return f"Failed to pull image {EKS_IMAGE_ACCOUNT}.dkr.ecr.{region}.amazonaws.com: {denied}"
    return None
