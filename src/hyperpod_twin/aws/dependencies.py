"""EC2 deletions that AWS refuses while HyperPod, EKS or FSx network interfaces still use the resource."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .protocol import AwsError, AwsRequest

if TYPE_CHECKING:
    from .side import AwsSide


def _subnet_users(side: AwsSide, region: str, subnet: str) -> list[str]:
    users: list[str] = []
    for cluster in side.life.clusters.values():
        if cluster.region == region and any(n.subnet_id == subnet for n in cluster.nodes.values()):
            users.append(f"HyperPod cluster {cluster.name}")
    for name, eks in side.ctx.eks(region).clusters.items():
        if subnet in ((eks.resources_vpc_config or {}).get("subnetIds") or []):
            users.append(f"EKS cluster {name}")
    for fs in side.fsx.file_systems.values():
        if fs["_region"] == region and subnet in fs["SubnetIds"]:
            users.append(f"FSx file system {fs['FileSystemId']}")
    return users


def _group_users(side: AwsSide, region: str, group: str) -> list[str]:
    users: list[str] = []
    for cluster in side.life.clusters.values():
        if cluster.region != region:
            continue
        groups = set(cluster.vpc_config.get("SecurityGroupIds") or [])
        for g in cluster.groups.values():
            groups.update((g.spec.get("OverrideVpcConfig") or {}).get("SecurityGroupIds") or [])
        if group in groups:
            users.append(f"HyperPod cluster {cluster.name}")
    for name, eks in side.ctx.eks(region).clusters.items():
        vpc: dict[str, Any] = eks.resources_vpc_config or {}
        if group in (vpc.get("securityGroupIds") or []) or group == vpc.get("clusterSecurityGroupId"):
            users.append(f"EKS cluster {name}")
    for fs in side.fsx.file_systems.values():
        if fs["_region"] == region and group in fs["_security_groups"]:
            users.append(f"FSx file system {fs['FileSystemId']}")
    return users


def register(side: AwsSide) -> None:
    """Guard DeleteSubnet and DeleteSecurityGroup with the twin's own network interface users."""
    ctx = side.ctx

    def subnet_guard(req: AwsRequest) -> None:
        subnet = str(req.params.get("SubnetId") or "")
        users = _subnet_users(side, req.region, subnet)
        if users:
            raise AwsError(
                "DependencyViolation",
                f"The subnet '{subnet}' has dependencies and cannot be deleted. (in use by {', '.join(users)})",
            )

    def group_guard(req: AwsRequest) -> None:
        group = str(req.params.get("GroupId") or "")
        if not group:
            return
        users = _group_users(side, req.region, group)
        if users:
            raise AwsError(
                "DependencyViolation", f"resource {group} has a dependent object (in use by {', '.join(users)})"
            )

    ctx.guards[("ec2", "DeleteSubnet")] = subnet_guard
    ctx.guards[("ec2", "DeleteSecurityGroup")] = group_guard
    ctx.guards[("ec2", "CreateSubnet")] = subnet_size_guard


def subnet_size_guard(req: AwsRequest) -> None:
    """EC2 subnets are /16 to /28 (IPv4); moto accepts any prefix."""
    cidr = str(req.params.get("CidrBlock") or "")
    if "/" not in cidr:
        return
    try:
        prefix = int(cidr.rsplit("/", 1)[1])
    except ValueError:
        return
    if not 16 <= prefix <= 28:
        raise AwsError("InvalidSubnet.Range", f"The CIDR '{cidr}' is invalid.")
