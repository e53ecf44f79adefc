"""A VPC the operator already has (vpcId): checked before use, and where the cluster's own subnets fit in it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from instantstart.aws import vpc as ec2
from instantstart.aws.clients import AwsClients
from instantstart.errors import NotFound, PreconditionFailed
from instantstart.manifests.network import COMPUTE_MAX_PREFIX, SMALL_PREFIXES, AddressPlan, plan_in_free_space
from instantstart.services.core.ledger import TAG_CLUSTER

LEAVE_OUT = "or leave vpcId out and InstantStart creates a VPC of its own"
CLUSTER_SUBNETS = (
    f"the cluster's subnets (a /{COMPUTE_MAX_PREFIX} HyperPod compute subnet and four /{SMALL_PREFIXES[-1]} or "
    "larger public and EKS control-plane subnets in two AZs)"
)
CLI_FLAGS = {"enableDnsSupport": "enable-dns-support", "enableDnsHostnames": "enable-dns-hostnames"}


@dataclass(frozen=True)
class VpcProblem:
    """Why a VPC cannot be reused: a preflight blocker code, what is wrong and the exact fix."""

    code: str
    message: str
    hint: str


def vpc_cidrs(vpc: dict[str, Any]) -> list[str]:
    """The VPC's IPv4 CIDR blocks in use (the primary first, then associated secondary blocks)."""
    blocks = [
        str(a["CidrBlock"])
        for a in vpc.get("CidrBlockAssociationSet") or []
        if (a.get("CidrBlockState") or {}).get("State", "associated") == "associated"
    ]
    primary = str(vpc["CidrBlock"])
    return [primary, *[b for b in blocks if b != primary]]


def theirs(subnet: dict[str, Any], cluster_tag: str) -> bool:
    """A subnet that is not this cluster's (its own subnets are adopted by role, so their blocks stay free)."""
    return not any(t["Key"] == TAG_CLUSTER and t["Value"] == cluster_tag for t in subnet.get("Tags") or [])


def no_room(vpc_id: str, cidrs: list[str], used: list[str], what: str) -> VpcProblem:
    """The VPC's address space cannot hold `what` beside its subnets `used`: what to do about it."""
    return VpcProblem(
        "VPC_NO_ROOM",
        f"VPC {vpc_id} ({', '.join(cidrs)}) has no room for {what} that overlaps none of its subnets "
        f"({', '.join(used) or 'none'}).",
        f"Add a secondary CIDR block to the VPC (aws ec2 associate-vpc-cidr-block --vpc-id {vpc_id} --cidr-block "
        f"<an unused /16-/19 such as 10.100.0.0/16>), free addresses by deleting unused subnets, {LEAVE_OUT}.",
    )


def _check(aws: AwsClients, region: str, vpc_id: str, cluster_tag: str) -> tuple[Any, VpcProblem | None]:
    """The VPC and its address plan, or the first reason it cannot be reused."""
    found = ec2.find_vpcs(aws, region, filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    if not found:
        return None, VpcProblem(
            "VPC_NOT_FOUND",
            f"VPC {vpc_id} does not exist in {region}.",
            f"Check the id (aws ec2 describe-vpcs --region {region}); a VPC belongs to one Region, so give region "
            f"as the VPC's Region, {LEAVE_OUT}.",
        )
    vpc = found[0]
    if vpc.get("State") not in (None, "available"):
        return None, VpcProblem(
            "VPC_NOT_AVAILABLE", f"VPC {vpc_id} is {vpc.get('State')}, not available.", "Wait until it is available."
        )
    dns = ec2.vpc_dns(aws, region, vpc_id)
    off = [name for name, on in dns.items() if not on]
    if off:
        # One attribute per call, support before hostnames (AWS enables hostnames only where support is on).
        fixes = "; then ".join(
            f"aws ec2 modify-vpc-attribute --region {region} --vpc-id {vpc_id} --{CLI_FLAGS[name]} '{{\"Value\":true}}'"
            for name in off
        )
        return None, VpcProblem(
            "VPC_DNS",
            f"VPC {vpc_id} has {' and '.join(off)} off; EKS and HyperPod need DNS support and DNS hostnames on "
            "(nodes resolve the cluster's private endpoint through them). InstantStart does not change a VPC it did "
            "not create.",
            f"Turn them on: {fixes}.",
        )
    subnets = ec2.find_subnets(aws, region, filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    used = [str(s["CidrBlock"]) for s in subnets if theirs(s, cluster_tag)]
    plan = plan_in_free_space(vpc_cidrs(vpc), used)
    if plan is None:
        return None, no_room(vpc_id, vpc_cidrs(vpc), used, CLUSTER_SUBNETS)
    return (vpc, plan), None


def problem(aws: AwsClients, region: str, vpc_id: str) -> VpcProblem | None:
    """Blocking: why the VPC cannot hold a new cluster, or None (the preflight's check; changes nothing)."""
    return _check(aws, region, vpc_id, "")[1]


def require_reusable(aws: AwsClients, region: str, vpc_id: str, cluster_tag: str) -> tuple[dict[str, Any], AddressPlan]:
    """Blocking: the VPC and the cluster's subnets in its free space; NotFound or PreconditionFailed (field vpcId,
    with the exact fix) when it does not exist in the Region, is not available, has DNS off or has no room."""
    found, why = _check(aws, region, vpc_id, cluster_tag)
    if why is not None:
        details = {"code": why.code, "fields": [{"field": "vpcId", "message": why.message}]}
        if why.code == "VPC_NOT_FOUND":
            raise NotFound(f"vpcId: {why.message}", hint=why.hint, details=details)
        raise PreconditionFailed(f"vpcId: {why.message}", hint=why.hint, details=details)
    vpc, plan = found
    return vpc, plan
