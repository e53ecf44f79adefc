"""Address planning: a VPC CIDR that avoids the Region's VPCs, and the subnets carved from it."""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from instantstart.errors import InvalidInput

Net = ipaddress.IPv4Network
COMPUTE_MAX_PREFIX = 20  # a HyperPod compute subnet is /20 or larger (4,091 usable addresses)
AWS_RESERVED_PER_SUBNET = 5


@dataclass(frozen=True)
class AddressPlan:
    """The VPC and its subnets: two public, two EKS control-plane (private), one compute per AZ."""

    vpc: str
    public: tuple[str, str]
    eks_private: tuple[str, str]
    compute: str

    def all_subnets(self) -> list[str]:
        """Every subnet CIDR of the plan."""
        return [*self.public, *self.eks_private, self.compute]


def parse_cidr(value: str, field: str) -> Net:
    """An IPv4 network from user input, with a field-named error."""
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise InvalidInput(
            f"Invalid input: {field}: {value!r} is not a valid IPv4 CIDR ({exc})",
            details={"fields": [{"field": field, "message": str(exc)}]},
        ) from None
    if not isinstance(net, ipaddress.IPv4Network):
        raise InvalidInput(
            f"Invalid input: {field}: only IPv4 CIDRs are supported",
            details={"fields": [{"field": field, "message": "IPv4 only"}]},
        )
    return net


def choose_vpc_cidr(existing: Iterable[str], prefix: int = 16) -> str:
    """The first private /16 (10.x, then 172.16-31) that overlaps none of the existing VPC CIDRs."""
    taken = [ipaddress.ip_network(c) for c in existing]
    pools = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("172.16.0.0/12")]
    for pool in pools:
        for candidate in pool.subnets(new_prefix=prefix):
            if not any(candidate.overlaps(t) for t in taken):
                return str(candidate)
    raise InvalidInput("No free private /16 is left in this Region; give vpcCidr explicitly or reuse a VPC.")


def plan_addresses(vpc_cidr: str) -> AddressPlan:
    """Default subnets of a VPC: publics and EKS privates are small /24s at the bottom; compute is a /20
    above them (EKS control-plane subnets need a handful of addresses, compute needs thousands)."""
    vpc = parse_cidr(vpc_cidr, "vpcCidr")
    if vpc.prefixlen > 18:
        raise InvalidInput(
            f"Invalid input: vpcCidr: /{vpc.prefixlen} is too small; use /18 or larger",
            details={"fields": [{"field": "vpcCidr", "message": "use /18 or larger"}]},
        )
    if vpc.prefixlen < 16:
        raise InvalidInput(
            f"Invalid input: vpcCidr: /{vpc.prefixlen} is larger than AWS allows for a VPC; use /16-/18",
            details={"fields": [{"field": "vpcCidr", "message": "use /16-/18"}]},
        )
    # Only the first few blocks are needed: never enumerate the whole network.
    small = list(itertools.islice(vpc.subnets(new_prefix=24), 4))
    computes = list(itertools.islice(vpc.subnets(new_prefix=COMPUTE_MAX_PREFIX), 2))
    return AddressPlan(
        vpc=str(vpc),
        public=(str(small[0]), str(small[1])),
        eks_private=(str(small[2]), str(small[3])),
        compute=str(computes[1]),
    )


def validate_plan(plan: AddressPlan) -> None:
    """Every subnet inside the VPC, none overlapping, compute /20 or larger. Errors name the field."""
    vpc = parse_cidr(plan.vpc, "vpcCidr")
    named = [
        ("publicSubnet1Cidr", plan.public[0]),
        ("publicSubnet2Cidr", plan.public[1]),
        ("eksPrivateSubnet1Cidr", plan.eks_private[0]),
        ("eksPrivateSubnet2Cidr", plan.eks_private[1]),
        ("hyperPodPrivateSubnetCidr", plan.compute),
    ]
    nets: list[tuple[str, Net]] = [(field, parse_cidr(value, field)) for field, value in named]
    for field, net in nets:
        if not net.subnet_of(vpc):
            raise InvalidInput(
                f"Invalid input: {field}: {net} is not inside the VPC {vpc}",
                details={"fields": [{"field": field, "message": f"not inside {vpc}"}]},
            )
        if net.prefixlen > 28:
            raise InvalidInput(
                f"Invalid input: {field}: {net} is smaller than /28, the smallest AWS subnet",
                details={"fields": [{"field": field, "message": "smaller than /28"}]},
            )
    for i, (field, net) in enumerate(nets):
        for other_field, other in nets[i + 1 :]:
            if net.overlaps(other):
                raise InvalidInput(
                    f"Invalid input: {other_field}: {other} overlaps {field} {net}",
                    details={"fields": [{"field": other_field, "message": f"overlaps {field}"}]},
                )
    compute = nets[-1][1]
    if compute.prefixlen > COMPUTE_MAX_PREFIX:
        raise InvalidInput(
            f"Invalid input: hyperPodPrivateSubnetCidr: {compute} is smaller than /{COMPUTE_MAX_PREFIX}; HyperPod "
            "compute subnets need /20 or larger (each node and pod takes an address)",
            details={"fields": [{"field": "hyperPodPrivateSubnetCidr", "message": "use /20 or larger"}]},
        )


def usable_addresses(cidr: str) -> int:
    """Addresses AWS lets instances use in a subnet (it reserves five)."""
    return int(ipaddress.ip_network(cidr).num_addresses) - AWS_RESERVED_PER_SUBNET


def next_free_subnet(vpc_cidr: str, used: Iterable[str], prefix: int = COMPUTE_MAX_PREFIX) -> str:
    """The lowest /prefix block of the VPC that overlaps no used subnet (for new compute subnets)."""
    vpc = parse_cidr(vpc_cidr, "vpcCidr")
    found = free_block([str(vpc)], used, prefix)
    if found is not None:
        return found
    raise InvalidInput(
        f"The VPC {vpc} has no free /{prefix} left for a compute subnet.",
        hint="Give subnetId to reuse an existing subnet, or add a secondary CIDR to the VPC.",
    )


# The public and EKS control-plane subnets: /24 when the VPC has room, smaller in a crowded VPC (EKS needs at least
# six free addresses in each of its subnets and recommends /28 or larger; a NAT gateway needs one).
SMALL_PREFIXES = (24, 26, 28)


def free_block(vpc_cidrs: Iterable[str], used: Iterable[str], prefix: int) -> str | None:
    """The lowest /prefix block of any of the VPC's CIDR blocks that overlaps no used subnet; None when full."""
    taken = [ipaddress.ip_network(c) for c in used]
    for cidr in vpc_cidrs:
        block = ipaddress.ip_network(cidr)
        if block.prefixlen > prefix:
            continue
        for candidate in block.subnets(new_prefix=prefix):
            if not any(candidate.overlaps(t) for t in taken):
                return str(candidate)
    return None


def plan_in_free_space(vpc_cidrs: list[str], used: Iterable[str]) -> AddressPlan | None:
    """Subnets for a VPC that already holds `used` subnets (an operator's VPC): the /20 compute subnet first (the
    largest, so small blocks do not fragment the space it needs), then two public and two EKS control-plane subnets
    of the largest of SMALL_PREFIXES that fits four times. None when the VPC has no room for them."""
    taken = list(used)
    compute = free_block(vpc_cidrs, taken, COMPUTE_MAX_PREFIX)
    if compute is None:
        return None
    taken.append(compute)
    for prefix in SMALL_PREFIXES:
        picks: list[str] = []
        for _ in range(4):
            block = free_block(vpc_cidrs, [*taken, *picks], prefix)
            if block is None:
                break
            picks.append(block)
        if len(picks) == 4:
            return AddressPlan(
                vpc=vpc_cidrs[0], public=(picks[0], picks[1]), eks_private=(picks[2], picks[3]), compute=compute
            )
    return None
