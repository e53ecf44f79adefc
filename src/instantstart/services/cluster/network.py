"""Network: the VPC, public and EKS control-plane subnets, NAT, routes, the security group, compute subnets.

Every function is an idempotent ensure step (look by tag first, adopt, create only the difference) and
runs blocking boto3 calls: stages call them through a worker thread.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from instantstart.aws.errors import translate
from instantstart.errors import InvalidInput, NotFound, PreconditionFailed
from instantstart.manifests.network import (
    AddressPlan,
    choose_vpc_cidr,
    next_free_subnet,
    plan_addresses,
    usable_addresses,
)
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_ROLE, aws_tags, record
from instantstart.store.db import Database

COMPUTE_ROLE = "compute"


@dataclass
class NetCtx:
    """Who is asking: the cluster tag and operation (for tags and the ledger), the Region, the clients."""

    ec2: Any
    db: Database
    cluster_tag: str
    operation_id: str
    region: str

    def tags(self, name: str, role: str, resource_type: str) -> list[dict[str, Any]]:
        """TagSpecifications for a create call."""
        return [{"ResourceType": resource_type, "Tags": aws_tags(self.cluster_tag, self.operation_id, name, role)}]

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


def _call(action: str, fn: Any, **kwargs: Any) -> Any:
    try:
        return fn(**kwargs)
    except Exception as exc:
        raise translate(exc, action) from exc


def availability_zones(ec2: Any) -> list[dict[str, str]]:
    """Available AZs of the Region with their IDs, sorted by name."""
    zones = _call(
        "describe availability zones",
        ec2.describe_availability_zones,
        Filters=[{"Name": "state", "Values": ["available"]}],
    )["AvailabilityZones"]
    return sorted(({"name": z["ZoneName"], "id": z["ZoneId"]} for z in zones), key=lambda z: z["name"])


def ensure_vpc(n: NetCtx, *, vpc_id: str | None, vpc_cidr: str | None) -> dict[str, Any]:
    """The cluster's VPC: the given one (validated, never tagged as ours), ours by tag, or a new one."""
    if vpc_id:
        vpcs = _call("describe VPC", n.ec2.describe_vpcs, Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Vpcs"]
        if not vpcs:
            raise NotFound(f"VPC {vpc_id} does not exist in {n.region}.", hint="Check the VPC id and Region.")
        vpc = vpcs[0]
        if vpc.get("State") not in (None, "available"):
            raise PreconditionFailed(f"VPC {vpc_id} is {vpc.get('State')}, not available.")
        return {"vpcId": vpc_id, "vpcCidr": vpc["CidrBlock"], "vpcCreated": False}
    mine = _call("find the cluster VPC", n.ec2.describe_vpcs, Filters=n.filters("vpc"))["Vpcs"]
    if mine:
        return {"vpcId": mine[0]["VpcId"], "vpcCidr": mine[0]["CidrBlock"], "vpcCreated": True}
    existing = [
        a["CidrBlock"]
        for v in _call("list VPCs", n.ec2.describe_vpcs)["Vpcs"]
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
    vpc = _call(
        "create VPC",
        n.ec2.create_vpc,
        CidrBlock=cidr,
        TagSpecifications=n.tags(f"instantstart-{n.cluster_tag}", "vpc", "vpc"),
    )["Vpc"]
    n.ledger("ec2:vpc", vpc["VpcId"], cidr=cidr)
    for attribute in ("EnableDnsSupport", "EnableDnsHostnames"):
        _call("enable VPC DNS", n.ec2.modify_vpc_attribute, VpcId=vpc["VpcId"], **{attribute: {"Value": True}})
    return {"vpcId": vpc["VpcId"], "vpcCidr": cidr, "vpcCreated": True}


def ensure_subnet(n: NetCtx, *, vpc_id: str, role: str, cidr: str, az: str, public: bool) -> str:
    """A subnet of this cluster with `role` (public-1, eks-private-2, compute-us-west-2c …)."""
    found = _call("find subnet", n.ec2.describe_subnets, Filters=n.filters(role, vpc_id))["Subnets"]
    if found:
        return str(found[0]["SubnetId"])
    subnet = _call(
        f"create subnet {role}",
        n.ec2.create_subnet,
        VpcId=vpc_id,
        CidrBlock=cidr,
        AvailabilityZone=az,
        TagSpecifications=n.tags(f"instantstart-{n.cluster_tag}-{role}", role, "subnet"),
    )["Subnet"]
    n.ledger("ec2:subnet", subnet["SubnetId"], role=role, cidr=cidr, az=az)
    if public:
        _call(
            "map public IPs",
            n.ec2.modify_subnet_attribute,
            SubnetId=subnet["SubnetId"],
            MapPublicIpOnLaunch={"Value": True},
        )
    return str(subnet["SubnetId"])


def ensure_internet_gateway(n: NetCtx, vpc_id: str) -> str:
    """The VPC's internet gateway (an existing attached one is reused)."""
    attached = _call(
        "find internet gateway",
        n.ec2.describe_internet_gateways,
        Filters=[{"Name": "attachment.vpc-id", "Values": [vpc_id]}],
    )["InternetGateways"]
    if attached:
        return str(attached[0]["InternetGatewayId"])
    igw = _call(
        "create internet gateway",
        n.ec2.create_internet_gateway,
        TagSpecifications=n.tags(f"instantstart-{n.cluster_tag}-igw", "igw", "internet-gateway"),
    )
    igw_id = igw["InternetGateway"]["InternetGatewayId"]
    n.ledger("ec2:internet-gateway", igw_id, vpcId=vpc_id)
    _call("attach internet gateway", n.ec2.attach_internet_gateway, InternetGatewayId=igw_id, VpcId=vpc_id)
    return str(igw_id)


def ensure_nat_gateway(n: NetCtx, vpc_id: str, public_subnet_id: str) -> str:
    """A NAT gateway in the first public subnet, with its Elastic IP."""
    found = _call(
        "find NAT gateway",
        n.ec2.describe_nat_gateways,
        Filters=[*n.filters("nat", vpc_id), {"Name": "state", "Values": ["pending", "available"]}],
    )
    nats = tagged(found["NatGateways"], n.cluster_tag, "nat")
    if nats:
        return str(nats[0]["NatGatewayId"])
    addresses = tagged(
        _call("find NAT address", n.ec2.describe_addresses, Filters=n.filters("nat-eip"))["Addresses"],
        n.cluster_tag,
        "nat-eip",
    )
    if addresses:
        allocation = addresses[0]["AllocationId"]
    else:
        allocation = _call(
            "allocate NAT address",
            n.ec2.allocate_address,
            Domain="vpc",
            TagSpecifications=n.tags(f"instantstart-{n.cluster_tag}-nat", "nat-eip", "elastic-ip"),
        )["AllocationId"]
        n.ledger("ec2:elastic-ip", allocation)
    nat = _call(
        "create NAT gateway",
        n.ec2.create_nat_gateway,
        SubnetId=public_subnet_id,
        AllocationId=allocation,
        TagSpecifications=n.tags(f"instantstart-{n.cluster_tag}-nat", "nat", "natgateway"),
    )["NatGateway"]
    n.ledger("ec2:nat-gateway", nat["NatGatewayId"], subnetId=public_subnet_id)
    return str(nat["NatGatewayId"])


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
    found = _call("find route table", n.ec2.describe_route_tables, Filters=n.filters(role, vpc_id))["RouteTables"]
    if found:
        table = found[0]
    else:
        table = _call(
            "create route table",
            n.ec2.create_route_table,
            VpcId=vpc_id,
            TagSpecifications=n.tags(f"instantstart-{n.cluster_tag}-{role}", role, "route-table"),
        )["RouteTable"]
        n.ledger("ec2:route-table", table["RouteTableId"], role=role)
    table_id = table["RouteTableId"]
    has_default = any(r.get("DestinationCidrBlock") == "0.0.0.0/0" for r in table.get("Routes", []))
    if not has_default:
        target = {"GatewayId": gateway_id} if gateway_id else {"NatGatewayId": nat_gateway_id}
        _call(
            "add default route", n.ec2.create_route, RouteTableId=table_id, DestinationCidrBlock="0.0.0.0/0", **target
        )
    associated = {a.get("SubnetId") for a in table.get("Associations", [])}
    for subnet_id in subnet_ids:
        if subnet_id not in associated:
            _associate(n, table_id, subnet_id)
    return str(table_id)


def _associate(n: NetCtx, table_id: str, subnet_id: str) -> None:
    # A subnet has one route table: move it off the main table if needed.
    current = _call(
        "find subnet route table",
        n.ec2.describe_route_tables,
        Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}],
    )["RouteTables"]
    for other in current:
        for assoc in other.get("Associations", []):
            if assoc.get("SubnetId") == subnet_id:
                if other["RouteTableId"] == table_id:
                    return
                _call(
                    "replace subnet route table",
                    n.ec2.replace_route_table_association,
                    AssociationId=assoc["RouteTableAssociationId"],
                    RouteTableId=table_id,
                )
                return
    _call("associate route table", n.ec2.associate_route_table, RouteTableId=table_id, SubnetId=subnet_id)


def ensure_s3_endpoint(n: NetCtx, vpc_id: str, route_table_ids: list[str]) -> str:
    """The VPC's S3 gateway endpoint, associated with the private route tables (created if absent)."""
    service = f"com.amazonaws.{n.region}.s3"
    found = _call(
        "find S3 endpoint",
        n.ec2.describe_vpc_endpoints,
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "service-name", "Values": [service]}],
    )
    endpoints = [
        e
        for e in found["VpcEndpoints"]
        if e.get("VpcEndpointType", "Gateway") == "Gateway"
        and e.get("State", "available").lower() not in ("deleted", "deleting")
    ]
    if endpoints:
        endpoint = endpoints[0]
        missing = [t for t in route_table_ids if t not in endpoint.get("RouteTableIds", [])]
        if missing:
            _call(
                "associate S3 endpoint",
                n.ec2.modify_vpc_endpoint,
                VpcEndpointId=endpoint["VpcEndpointId"],
                AddRouteTableIds=missing,
            )
        return str(endpoint["VpcEndpointId"])
    endpoint = _call(
        "create S3 endpoint",
        n.ec2.create_vpc_endpoint,
        VpcId=vpc_id,
        ServiceName=service,
        VpcEndpointType="Gateway",
        RouteTableIds=route_table_ids,
        TagSpecifications=n.tags(f"instantstart-{n.cluster_tag}-s3", "s3-endpoint", "vpc-endpoint"),
    )["VpcEndpoint"]
    n.ledger("ec2:vpc-endpoint", endpoint["VpcEndpointId"], service=service)
    return str(endpoint["VpcEndpointId"])


def ensure_security_group(n: NetCtx, vpc_id: str) -> str:
    """A security group allowing all traffic from itself (EFA needs it) and all egress."""
    found = _call("find security group", n.ec2.describe_security_groups, Filters=n.filters("cluster-sg", vpc_id))[
        "SecurityGroups"
    ]
    if found:
        group = found[0]
    else:
        group_id = _call(
            "create security group",
            n.ec2.create_security_group,
            VpcId=vpc_id,
            GroupName=f"instantstart-{n.cluster_tag}",
            Description=f"InstantStart cluster {n.cluster_tag}: intra-cluster traffic (EFA) and egress",
            TagSpecifications=n.tags(f"instantstart-{n.cluster_tag}", "cluster-sg", "security-group"),
        )["GroupId"]
        n.ledger("ec2:security-group", group_id)
        group = _call("describe security group", n.ec2.describe_security_groups, GroupIds=[group_id])["SecurityGroups"][
            0
        ]
    group_id = group["GroupId"]
    self_rule = any(
        p.get("IpProtocol") == "-1" and any(g.get("GroupId") == group_id for g in p.get("UserIdGroupPairs", []))
        for p in group.get("IpPermissions", [])
    )
    if not self_rule:
        _call(
            "allow intra-cluster traffic",
            n.ec2.authorize_security_group_ingress,
            GroupId=group_id,
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}],
        )
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
        subnets = _call("describe subnet", n.ec2.describe_subnets, SubnetIds=[subnet_id])["Subnets"]
        subnet = subnets[0]
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
    found = _call("find compute subnet", n.ec2.describe_subnets, Filters=n.filters(role, vpc_id))["Subnets"]
    for subnet in found:
        if subnet.get("AvailableIpAddressCount", min_free) >= min_free and subnet["AvailabilityZone"] == az:
            return {"subnetId": subnet["SubnetId"], "created": False, "cidr": subnet["CidrBlock"], "az": az}
    vpc = _call("describe VPC", n.ec2.describe_vpcs, VpcIds=[vpc_id])["Vpcs"][0]
    used = [
        s["CidrBlock"]
        for s in _call("list subnets", n.ec2.describe_subnets, Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])[
            "Subnets"
        ]
    ]
    free_preferred = preferred_cidr and not any(
        ipaddress.ip_network(preferred_cidr).overlaps(ipaddress.ip_network(u)) for u in used
    )
    cidr = preferred_cidr if preferred_cidr and free_preferred else next_free_subnet(vpc["CidrBlock"], used)
    new_id = ensure_subnet(n, vpc_id=vpc_id, role=role, cidr=cidr, az=az, public=False)
    table_id = ensure_route_table(
        n, vpc_id=vpc_id, role=f"rt-{role}", subnet_ids=[new_id], nat_gateway_id=nat_gateway_id
    )
    if s3_endpoint_id:
        endpoint = _call("describe S3 endpoint", n.ec2.describe_vpc_endpoints, VpcEndpointIds=[s3_endpoint_id])
        if table_id not in endpoint["VpcEndpoints"][0].get("RouteTableIds", []):
            _call(
                "associate S3 endpoint",
                n.ec2.modify_vpc_endpoint,
                VpcEndpointId=s3_endpoint_id,
                AddRouteTableIds=[table_id],
            )
    return {"subnetId": new_id, "created": True, "cidr": cidr, "az": az, "usableAddresses": usable_addresses(cidr)}


def ensure_network(n: NetCtx, *, vpc_id: str | None, plan: AddressPlan | None, vpc_cidr: str | None) -> dict[str, Any]:
    """Everything the EKS stage needs from the network; returns the ids (stage outputs)."""
    vpc = ensure_vpc(n, vpc_id=vpc_id, vpc_cidr=plan.vpc if plan else vpc_cidr)
    the_plan = plan or _plan_inside(n, vpc["vpcId"], vpc["vpcCidr"])
    zones = availability_zones(n.ec2)
    if len(zones) < 2:
        raise PreconditionFailed(f"{n.region} has fewer than two available AZs; EKS needs two.")
    az1, az2 = zones[0]["name"], zones[1]["name"]
    public = [
        ensure_subnet(n, vpc_id=vpc["vpcId"], role=f"public-{i + 1}", cidr=c, az=az, public=True)
        for i, (c, az) in enumerate(zip(the_plan.public, (az1, az2), strict=True))
    ]
    private = [
        ensure_subnet(n, vpc_id=vpc["vpcId"], role=f"eks-private-{i + 1}", cidr=c, az=az, public=False)
        for i, (c, az) in enumerate(zip(the_plan.eks_private, (az1, az2), strict=True))
    ]
    igw = ensure_internet_gateway(n, vpc["vpcId"])
    nat = ensure_nat_gateway(n, vpc["vpcId"], public[0])
    public_rt = ensure_route_table(n, vpc_id=vpc["vpcId"], role="rt-public", subnet_ids=public, gateway_id=igw)
    private_rt = ensure_route_table(
        n, vpc_id=vpc["vpcId"], role="rt-eks-private", subnet_ids=private, nat_gateway_id=nat
    )
    s3 = ensure_s3_endpoint(n, vpc["vpcId"], [private_rt])
    sg = ensure_security_group(n, vpc["vpcId"])
    return {
        **vpc,
        "publicSubnetIds": public,
        "eksSubnetIds": private,
        "internetGatewayId": igw,
        "natGatewayId": nat,
        "publicRouteTableId": public_rt,
        "privateRouteTableId": private_rt,
        "s3EndpointId": s3,
        "securityGroupId": sg,
        "computeSubnetCidr": the_plan.compute,
        "availabilityZones": [az1, az2],
    }


def _plan_inside(n: NetCtx, vpc_id: str, vpc_cidr: str) -> AddressPlan:
    """Default addresses; in a reused VPC, the first free blocks (publics and EKS privates are /24s)."""
    subnets = _call("list subnets", n.ec2.describe_subnets, Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]
    mine = [
        s for s in subnets if any(t["Key"] == TAG_CLUSTER and t["Value"] == n.cluster_tag for t in s.get("Tags", []))
    ]
    others = [s["CidrBlock"] for s in subnets if s not in mine]
    if not others:
        return plan_addresses(vpc_cidr)
    taken = list(others)
    picks = []
    for _ in range(4):
        block = next_free_subnet(vpc_cidr, taken, prefix=24)
        picks.append(block)
        taken.append(block)
    compute = next_free_subnet(vpc_cidr, taken)
    return AddressPlan(vpc=vpc_cidr, public=(picks[0], picks[1]), eks_private=(picks[2], picks[3]), compute=compute)
