"""Network: the VPC, public and EKS control-plane subnets, NAT, routes, the security group, compute subnets.

Every function is an idempotent ensure step (look by tag first, adopt, create only the difference) over
the blocking `aws.vpc` adapter: stages call them through a worker thread.
"""

from __future__ import annotations

import ipaddress
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from instantstart.aws import ec2_network
from instantstart.aws import vpc as ec2
from instantstart.aws.clients import AwsClients
from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.manifests.network import (
    COMPUTE_MAX_PREFIX,
    AddressPlan,
    choose_vpc_cidr,
    free_block,
    plan_addresses,
    plan_in_free_space,
    usable_addresses,
)
from instantstart.services.base import vpc_reuse
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_INSTALLATION, TAG_ROLE, aws_tags, record
from instantstart.store.db import Database

COMPUTE_ROLE = "compute"


@dataclass
class NetCtx:
    """Who is asking: the cluster tag and operation (for tags and the ledger), the Region, the AWS clients."""

    aws: AwsClients
    db: Database
    cluster_tag: str
    operation_id: str
    region: str

    def tags(self, name: str, role: str, resource_type: str) -> list[dict[str, Any]]:
        """TagSpecifications for a create call."""
        tags = aws_tags(self.cluster_tag, self.operation_id, name, role, installation_id(self.db))
        return [{"ResourceType": resource_type, "Tags": tags}]

    def ledger(self, resource_type: str, resource_id: str, **details: Any) -> None:
        """Record a resource this cluster created."""
        record(
            self.db,
            cluster_tag=self.cluster_tag,
            operation_id=self.operation_id,
            resource_type=resource_type,
            resource_id=resource_id,
            region=self.region,
            details=details,
        )

    def adopt(self, resource_type: str, item: dict[str, Any], key: str, **details: Any) -> str:
        """The id of a resource found by its tags, ledgered when this installation made it: a create whose reply
        a crash lost (kill -9 mid-call) left it in the account but not in the ledger, which must hold it."""
        tags = {t["Key"]: t["Value"] for t in item.get("Tags", []) or []}
        if tags.get(TAG_INSTALLATION) == installation_id(self.db):
            self.ledger(resource_type, str(item[key]), **details)
        return str(item[key])

    def filters(self, role: str | None = None, vpc_id: str | None = None) -> list[dict[str, Any]]:
        """Filters that find what this cluster tagged (optionally one role, in one VPC)."""
        found = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cluster_tag]}]
        if role:
            found.append({"Name": f"tag:{TAG_ROLE}", "Values": [role]})
        if vpc_id:
            found.append({"Name": "vpc-id", "Values": [vpc_id]})
        return found


def tagged(items: list[dict[str, Any]], cluster_tag: str, role: str | None = None) -> list[dict[str, Any]]:
    """Keep only resources whose own tags name this cluster (and role). Filters are asked of EC2 too, but
    not every implementation honours tag filters on every describe call, and adopting or deleting
    another cluster's resource must never happen."""

    def matches(item: dict[str, Any]) -> bool:
        tags = {t["Key"]: t["Value"] for t in item.get("Tags", []) or []}
        return tags.get(TAG_CLUSTER) == cluster_tag and (role is None or tags.get(TAG_ROLE) == role)

    return [i for i in items if matches(i)]


def ensure_vpc(n: NetCtx, *, vpc_cidr: str | None) -> dict[str, Any]:
    """The cluster's own VPC: ours by tag, or a new one (a reused VPC is vpc_reuse's)."""
    mine = ec2.find_vpcs(n.aws, n.region, filters=n.filters("vpc"))
    if mine:  # DNS set again: a crash may have come between CreateVpc and it
        ec2.enable_vpc_dns(n.aws, n.region, n.adopt("ec2:vpc", mine[0], "VpcId", cidr=mine[0]["CidrBlock"]))
        return {"vpcId": mine[0]["VpcId"], "vpcCidr": mine[0]["CidrBlock"], "vpcCreated": True}
    existing = [
        a["CidrBlock"]
        for v in ec2.find_vpcs(n.aws, n.region)
        for a in v.get("CidrBlockAssociationSet", [{"CidrBlock": v["CidrBlock"]}])
    ]
    if vpc_cidr:
        wanted = ipaddress.ip_network(vpc_cidr)
        clash = [c for c in existing if ipaddress.ip_network(c).overlaps(wanted)]
        if clash:
            raise InvalidInput(
                f"Invalid input: vpcCidr: {vpc_cidr} overlaps existing VPC CIDR {clash[0]} in {n.region}",
                details={"fields": [{"field": "vpcCidr", "message": f"overlaps {clash[0]}"}]},
            )
    cidr = vpc_cidr or choose_vpc_cidr(existing)
    new_id = ec2.create_vpc(n.aws, n.region, cidr, n.tags(f"instantstart-{n.cluster_tag}", "vpc", "vpc"))
    n.ledger("ec2:vpc", new_id, cidr=cidr)
    ec2.enable_vpc_dns(n.aws, n.region, new_id)
    return {"vpcId": new_id, "vpcCidr": cidr, "vpcCreated": True}


def ensure_subnet(n: NetCtx, *, vpc_id: str, role: str, cidr: str, az: str, public: bool) -> str:
    """A subnet of this cluster with `role` (public-1, eks-private-2, compute-us-west-2c …)."""
    found = ec2.find_subnets(n.aws, n.region, filters=n.filters(role, vpc_id))
    if found:
        return n.adopt("ec2:subnet", found[0], "SubnetId", role=role, cidr=found[0]["CidrBlock"], az=az)
    tags = n.tags(f"instantstart-{n.cluster_tag}-{role}", role, "subnet")
    subnet_id = ec2.create_subnet(n.aws, n.region, vpc_id=vpc_id, cidr=cidr, az=az, tags=tags)
    n.ledger("ec2:subnet", subnet_id, role=role, cidr=cidr, az=az)
    if public:
        ec2.map_public_ips(n.aws, n.region, subnet_id)
    return subnet_id


def ensure_internet_gateway(n: NetCtx, vpc_id: str) -> str:
    """The VPC's internet gateway (an existing attached one is reused)."""
    attached = ec2.find_internet_gateways(n.aws, n.region, vpc_id)
    if attached:  # the operator's in a reused VPC is not ours to ledger (adopt checks the installation tag)
        return n.adopt("ec2:internet-gateway", attached[0], "InternetGatewayId", vpcId=vpc_id)
    tags = n.tags(f"instantstart-{n.cluster_tag}-igw", "igw", "internet-gateway")
    igw_id = ec2.create_internet_gateway(n.aws, n.region, tags)
    n.ledger("ec2:internet-gateway", igw_id, vpcId=vpc_id)
    ec2.attach_internet_gateway(n.aws, n.region, igw_id, vpc_id)
    return igw_id


def ensure_nat_gateway(n: NetCtx, vpc_id: str, public_subnet_id: str) -> str:
    """A NAT gateway in the first public subnet, with its Elastic IP."""
    found = ec2.find_nat_gateways(
        n.aws, n.region, [*n.filters("nat", vpc_id), {"Name": "state", "Values": ["pending", "available"]}]
    )
    nats = tagged(found, n.cluster_tag, "nat")
    if nats:
        return n.adopt("ec2:nat-gateway", nats[0], "NatGatewayId", subnetId=public_subnet_id)
    addresses = tagged(ec2.find_addresses(n.aws, n.region, n.filters("nat-eip")), n.cluster_tag, "nat-eip")
    if addresses:
        allocation = n.adopt("ec2:elastic-ip", addresses[0], "AllocationId")
    else:
        eip_tags = n.tags(f"instantstart-{n.cluster_tag}-nat", "nat-eip", "elastic-ip")
        allocation = ec2.allocate_address(n.aws, n.region, eip_tags)
        n.ledger("ec2:elastic-ip", allocation)
    nat_tags = n.tags(f"instantstart-{n.cluster_tag}-nat", "nat", "natgateway")
    nat_id = ec2.create_nat_gateway(
        n.aws, n.region, subnet_id=public_subnet_id, allocation_id=allocation, tags=nat_tags
    )
    n.ledger("ec2:nat-gateway", nat_id, subnetId=public_subnet_id)
    return nat_id


def ensure_route_table(
    n: NetCtx,
    *,
    vpc_id: str,
    role: str,
    subnet_ids: list[str],
    gateway_id: str | None = None,
    nat_gateway_id: str | None = None,
) -> str:
    """A route table with a default route (IGW or NAT), associated with the given subnets."""
    found = ec2.find_route_tables(n.aws, n.region, n.filters(role, vpc_id))
    if found:
        table = found[0]
        n.adopt("ec2:route-table", table, "RouteTableId", role=role)
    else:
        tags = n.tags(f"instantstart-{n.cluster_tag}-{role}", role, "route-table")
        table = ec2.create_route_table(n.aws, n.region, vpc_id, tags)
        n.ledger("ec2:route-table", table["RouteTableId"], role=role)
    table_id = table["RouteTableId"]
    has_default = any(r.get("DestinationCidrBlock") == "0.0.0.0/0" for r in table.get("Routes", []))
    if not has_default:
        ec2.create_default_route(n.aws, n.region, table_id, gateway_id=gateway_id, nat_gateway_id=nat_gateway_id)
    associated = {a.get("SubnetId") for a in table.get("Associations", [])}
    for subnet_id in subnet_ids:
        if subnet_id not in associated:
            _associate(n, table_id, subnet_id)
    return str(table_id)


def _associate(n: NetCtx, table_id: str, subnet_id: str) -> None:
    # A subnet has one route table: move it off the main table if needed.
    current = ec2.find_route_tables(n.aws, n.region, [{"Name": "association.subnet-id", "Values": [subnet_id]}])
    for other in current:
        for assoc in other.get("Associations", []):
            if assoc.get("SubnetId") == subnet_id:
                if other["RouteTableId"] == table_id:
                    return
                ec2.replace_route_table_association(n.aws, n.region, assoc["RouteTableAssociationId"], table_id)
                return
    ec2.associate_route_table(n.aws, n.region, table_id, subnet_id)


def ensure_s3_endpoint(n: NetCtx, vpc_id: str, route_table_ids: list[str]) -> str:
    """The S3 gateway endpoint serving the route tables: the VPC's endpoint that already has them; else this
    cluster's own tagged endpoint, given the missing tables (created if absent). An endpoint of the operator's in a
    reused VPC is never changed (IAM allows ModifyVpcEndpoint only on endpoints with the cluster tag); a VPC may
    hold several S3 gateway endpoints, each route table on at most one, and ours carries only our own tables."""
    service = f"com.amazonaws.{n.region}.s3"
    found = ec2.find_vpc_endpoints(
        n.aws,
        n.region,
        filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "service-name", "Values": [service]}],
    )
    endpoints = [
        e
        for e in found
        if e.get("VpcEndpointType", "Gateway") == "Gateway"
        and e.get("State", "available").lower() not in ("deleted", "deleting")
    ]
    missing = [t for t in route_table_ids if not any(t in e.get("RouteTableIds", []) for e in endpoints)]
    ours = tagged(endpoints, n.cluster_tag)
    if not missing:
        serving = [e for e in endpoints if route_table_ids[0] in e.get("RouteTableIds", [])]
        return str((serving or ours or endpoints)[0]["VpcEndpointId"])
    if ours:
        n.adopt("ec2:vpc-endpoint", ours[0], "VpcEndpointId", service=service)
        ec2.add_endpoint_route_tables(n.aws, n.region, ours[0]["VpcEndpointId"], missing)
        return str(ours[0]["VpcEndpointId"])
    tags = n.tags(f"instantstart-{n.cluster_tag}-s3", "s3-endpoint", "vpc-endpoint")
    endpoint_id = ec2.create_gateway_endpoint(
        n.aws, n.region, vpc_id=vpc_id, service=service, table_ids=missing, tags=tags
    )
    n.ledger("ec2:vpc-endpoint", endpoint_id, service=service)
    return endpoint_id


def ensure_security_group(n: NetCtx, vpc_id: str) -> str:
    """A security group allowing all traffic from itself (EFA needs it) and all egress."""
    found = ec2.find_security_groups(n.aws, n.region, filters=n.filters("cluster-sg", vpc_id))
    if found:
        group = found[0]
        n.adopt("ec2:security-group", group, "GroupId")
    else:
        group_id = ec2.create_security_group(
            n.aws,
            n.region,
            vpc_id=vpc_id,
            name=f"instantstart-{n.cluster_tag}",
            description=f"InstantStart cluster {n.cluster_tag}: intra-cluster traffic (EFA) and egress",
            tags=n.tags(f"instantstart-{n.cluster_tag}", "cluster-sg", "security-group"),
        )
        n.ledger("ec2:security-group", group_id)
        group = ec2.find_security_groups(n.aws, n.region, ids=[group_id])[0]
    group_id = group["GroupId"]
    self_rule = any(
        p.get("IpProtocol") == "-1" and any(g.get("GroupId") == group_id for g in p.get("UserIdGroupPairs", []))
        for p in group.get("IpPermissions", [])
    )
    if not self_rule:
        ec2.allow_all_from_self(n.aws, n.region, group_id)
    return str(group_id)


def ensure_compute_subnet(
    n: NetCtx,
    *,
    vpc_id: str,
    az: str,
    subnet_id: str | None,
    nat_gateway_id: str | None,
    s3_endpoint_id: str | None,
    dedicated: bool = False,
    dedicated_name: str | None = None,
    min_free: int = 1,
    preferred_cidr: str | None = None,
) -> dict[str, Any]:
    """The one way capacity gets a subnet: the given one; else the shared per-AZ compute subnet (tagged,
    private, with free addresses); else a new /20 whose route table defaults to the NAT and is associated
    with the VPC's S3 gateway endpoint. `dedicated` makes a subnet of its own (kept after its group goes)."""
    if subnet_id:
        subnet = ec2.find_subnets(n.aws, n.region, ids=[subnet_id])[0]
        if subnet["VpcId"] != vpc_id:
            raise InvalidInput(
                f"Invalid input: subnetId: {subnet_id} is in {subnet['VpcId']}, not the cluster VPC {vpc_id}",
                details={"fields": [{"field": "subnetId", "message": "not in the cluster VPC"}]},
            )
        if subnet["AvailabilityZone"] != az:
            raise InvalidInput(
                f"Invalid input: subnetId: {subnet_id} is in {subnet['AvailabilityZone']}, not {az}",
                details={"fields": [{"field": "subnetId", "message": f"not in {az}"}]},
            )
        return {"subnetId": subnet_id, "created": False, "cidr": subnet["CidrBlock"], "az": az}
    role = f"{COMPUTE_ROLE}-{dedicated_name}" if dedicated and dedicated_name else f"{COMPUTE_ROLE}-{az}"
    found = ec2.find_subnets(n.aws, n.region, filters=n.filters(role, vpc_id))
    for subnet in found:
        if subnet.get("AvailableIpAddressCount", min_free) >= min_free and subnet["AvailabilityZone"] == az:
            return {"subnetId": subnet["SubnetId"], "created": False, "cidr": subnet["CidrBlock"], "az": az}
    vpc = ec2.find_vpcs(n.aws, n.region, ids=[vpc_id])[0]
    used = [s["CidrBlock"] for s in ec2.find_subnets(n.aws, n.region, filters=[{"Name": "vpc-id", "Values": [vpc_id]}])]
    free_preferred = preferred_cidr and not any(
        ipaddress.ip_network(preferred_cidr).overlaps(ipaddress.ip_network(u)) for u in used
    )
    cidrs = vpc_reuse.vpc_cidrs(vpc)
    cidr = preferred_cidr if preferred_cidr and free_preferred else free_block(cidrs, used, COMPUTE_MAX_PREFIX)
    if cidr is None:
        why = vpc_reuse.no_room(vpc_id, cidrs, used, f"a /{COMPUTE_MAX_PREFIX} compute subnet in {az}")
        raise PreconditionFailed(why.message, hint=f"{why.hint} Or give subnetId to use an existing subnet of {az}.")
    new_id = ensure_subnet(n, vpc_id=vpc_id, role=role, cidr=cidr, az=az, public=False)
    table_id = ensure_route_table(
        n, vpc_id=vpc_id, role=f"rt-{role}", subnet_ids=[new_id], nat_gateway_id=nat_gateway_id
    )
    if s3_endpoint_id:  # the cluster uses an S3 endpoint: the new table gets one too (ours, never the operator's)
        ensure_s3_endpoint(n, vpc_id, [table_id])
    return {"subnetId": new_id, "created": True, "cidr": cidr, "az": az, "usableAddresses": usable_addresses(cidr)}


def ensure_eks_network(
    n: NetCtx, *, vpc_id: str | None, plan: AddressPlan | None, vpc_cidr: str | None
) -> dict[str, Any]:
    """What CreateCluster needs: the VPC, the public and EKS private subnets in two AZs, the security group."""
    if vpc_id:  # the operator's VPC: checked (Region, state, DNS, room), never changed; our subnets in its free space
        reused, free_plan = vpc_reuse.require_reusable(n.aws, n.region, vpc_id, n.cluster_tag)
        vpc: dict[str, Any] = {"vpcId": vpc_id, "vpcCidr": reused["CidrBlock"], "vpcCreated": False}
        the_plan = plan or free_plan
    else:
        vpc = ensure_vpc(n, vpc_cidr=plan.vpc if plan else vpc_cidr)
        the_plan = plan or _plan_inside(n, vpc["vpcId"], vpc["vpcCidr"])
    zones = ec2_network.availability_zones(n.aws, n.region)
    if len(zones) < 2:
        raise PreconditionFailed(f"{n.region} has fewer than two available AZs; EKS needs two.")
    az1, az2 = zones[0]["name"], zones[1]["name"]
    vpc_id = vpc["vpcId"]
    # The four subnets and the security group are independent: made together (each is its own ensure step,
    # so a retry after a partial failure adopts what exists). Each one is a few AWS calls' round trips.
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="eks-network") as pool:
        public_made = [
            pool.submit(ensure_subnet, n, vpc_id=vpc_id, role=f"public-{i + 1}", cidr=c, az=az, public=True)
            for i, (c, az) in enumerate(zip(the_plan.public, (az1, az2), strict=True))
        ]
        private_made = [
            pool.submit(ensure_subnet, n, vpc_id=vpc_id, role=f"eks-private-{i + 1}", cidr=c, az=az, public=False)
            for i, (c, az) in enumerate(zip(the_plan.eks_private, (az1, az2), strict=True))
        ]
        sg_made = pool.submit(ensure_security_group, n, vpc_id)
        public = [made.result() for made in public_made]
        private = [made.result() for made in private_made]
        sg = sg_made.result()
    return {
        **vpc,
        "publicSubnetIds": public,
        "eksSubnetIds": private,
        "securityGroupId": sg,
        "computeSubnetCidr": the_plan.compute,
        "availabilityZones": [az1, az2],
    }


def ensure_egress(n: NetCtx, core: dict[str, Any]) -> dict[str, Any]:
    """The routes out of the subnets of `core` (from `ensure_eks_network`): internet and NAT gateways, the
    public and EKS private route tables, the S3 gateway endpoint. EKS does not need them to create its
    control plane, so the EKS stage makes them while it waits for it."""
    vpc_id, public, private = core["vpcId"], core["publicSubnetIds"], core["eksSubnetIds"]
    igw = ensure_internet_gateway(n, vpc_id)
    nat = ensure_nat_gateway(n, vpc_id, public[0])
    public_rt = ensure_route_table(n, vpc_id=vpc_id, role="rt-public", subnet_ids=public, gateway_id=igw)
    private_rt = ensure_route_table(n, vpc_id=vpc_id, role="rt-eks-private", subnet_ids=private, nat_gateway_id=nat)
    s3 = ensure_s3_endpoint(n, vpc_id, [private_rt])
    return {
        "internetGatewayId": igw,
        "natGatewayId": nat,
        "publicRouteTableId": public_rt,
        "privateRouteTableId": private_rt,
        "s3EndpointId": s3,
    }


def _plan_inside(n: NetCtx, vpc_id: str, vpc_cidr: str) -> AddressPlan:
    """Default addresses in the cluster's own VPC; around any subnet someone else has added to it since."""
    subnets = ec2.find_subnets(n.aws, n.region, filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    others = [s["CidrBlock"] for s in subnets if vpc_reuse.theirs(s, n.cluster_tag)]
    if not others:
        return plan_addresses(vpc_cidr)
    found = plan_in_free_space([vpc_cidr], others)
    if found is None:
        why = vpc_reuse.no_room(vpc_id, [vpc_cidr], others, vpc_reuse.CLUSTER_SUBNETS)
        raise PreconditionFailed(why.message, hint=why.hint)
    return found
