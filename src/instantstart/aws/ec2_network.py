"""EC2 calls: zones, instance type offerings, subnets, and finding and deleting tagged network resources."""

from __future__ import annotations

from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call
from instantstart.aws.paging import collect

# resource type (as the ledger names it) → (Describe call, result key, id key)
TAGGED = {
    "ec2:vpc": ("describe_vpcs", "Vpcs", "VpcId"),
    "ec2:subnet": ("describe_subnets", "Subnets", "SubnetId"),
    "ec2:nat-gateway": ("describe_nat_gateways", "NatGateways", "NatGatewayId"),
    "ec2:route-table": ("describe_route_tables", "RouteTables", "RouteTableId"),
    "ec2:internet-gateway": ("describe_internet_gateways", "InternetGateways", "InternetGatewayId"),
    "ec2:security-group": ("describe_security_groups", "SecurityGroups", "GroupId"),
    "ec2:elastic-ip": ("describe_addresses", "Addresses", "AllocationId"),
    "ec2:vpc-endpoint": ("describe_vpc_endpoints", "VpcEndpoints", "VpcEndpointId"),
}


def availability_zones(aws: AwsClients, region: str) -> list[dict[str, str]]:
    """Available AZs of the Region with their IDs, sorted by name."""
    zones = call(
        "describe availability zones",
        aws.ec2(region).describe_availability_zones,
        Filters=[{"Name": "state", "Values": ["available"]}],
    )["AvailabilityZones"]
    return sorted(({"name": z["ZoneName"], "id": z["ZoneId"]} for z in zones), key=lambda z: z["name"])


def instance_type_offerings(aws: AwsClients, region: str, names: list[str]) -> dict[str, list[str]]:
    """EC2 instance type (no ml. prefix) → the AZs offering it."""
    paginator = aws.ec2(region).get_paginator("describe_instance_type_offerings")
    pages = paginator.paginate(LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": names}])
    offered: dict[str, list[str]] = {}
    listed: list[Any] = call("look up instance type offerings", list, pages)
    for page in listed:
        for offer in page.get("InstanceTypeOfferings", []):
            offered.setdefault(offer["InstanceType"], []).append(offer["Location"])
    return {k: sorted(v) for k, v in offered.items()}


def vpc_count(aws: AwsClients, region: str) -> int:
    """How many VPCs the Region has."""
    return len(collect("list VPCs", aws.ec2(region), "describe_vpcs", "Vpcs"))


def describe_subnets(aws: AwsClients, region: str, ids: list[str]) -> list[dict[str, Any]]:
    """DescribeSubnets of the given ids."""
    answer = call("describe subnets", aws.ec2(region).describe_subnets, SubnetIds=ids)
    return cast("list[dict[str, Any]]", answer["Subnets"])


def network_interface_groups(aws: AwsClients, region: str, ids: list[str]) -> list[str]:
    """The security group ids on the given network interfaces (an FSx file system's, say), in first-seen order."""
    answer = call("describe network interfaces", aws.ec2(region).describe_network_interfaces, NetworkInterfaceIds=ids)
    groups = [g["GroupId"] for eni in answer.get("NetworkInterfaces", []) for g in eni.get("Groups", [])]
    return list(dict.fromkeys(groups))


def tagged_resources(
    aws: AwsClients, region: str, resource_type: str, filters: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The resources of one TAGGED type matching `filters` (the caller re-checks each item's own tags)."""
    method, key, _ = TAGGED[resource_type]
    fn = getattr(aws.ec2(region), method)
    return cast("list[dict[str, Any]]", call(f"scan {resource_type}", fn, Filters=filters)[key])


def nat_gateway(aws: AwsClients, region: str, nat_id: str) -> dict[str, Any] | None:
    """DescribeNatGateways of one gateway (State, FailureCode, FailureMessage, …), or None when EC2 no longer
    lists it."""
    nats = call(f"describe NAT gateway {nat_id}", aws.ec2(region).describe_nat_gateways, NatGatewayIds=[nat_id])
    found = nats["NatGateways"]
    return dict(found[0]) if found else None


def nat_gateway_state(aws: AwsClients, region: str, nat_id: str) -> str | None:
    """The NAT gateway's State, or None when EC2 no longer lists it."""
    found = nat_gateway(aws, region, nat_id)
    return str(found.get("State")) if found else None


def delete_route_table(aws: AwsClients, region: str, table_id: str) -> None:
    """Disassociate the (non-main) associations of a route table, then delete it."""
    ec2 = aws.ec2(region)
    action = f"delete route table {table_id}"
    table = call(action, ec2.describe_route_tables, RouteTableIds=[table_id])["RouteTables"][0]
    for assoc in table.get("Associations", []):
        if not assoc.get("Main"):
            call(action, ec2.disassociate_route_table, AssociationId=assoc["RouteTableAssociationId"])
    call(action, ec2.delete_route_table, RouteTableId=table_id)


def route_tables_via_gateway(aws: AwsClients, region: str, gateway_id: str) -> list[dict[str, Any]]:
    """The route tables with a route to the gateway (internet gateway or gateway endpoint)."""
    answer = call(
        f"find routes to {gateway_id}",
        aws.ec2(region).describe_route_tables,
        Filters=[{"Name": "route.gateway-id", "Values": [gateway_id]}],
    )
    return cast("list[dict[str, Any]]", answer["RouteTables"])


def delete_internet_gateway(aws: AwsClients, region: str, igw_id: str) -> None:
    """Detach an internet gateway from its VPCs, then delete it."""
    ec2 = aws.ec2(region)
    action = f"delete internet gateway {igw_id}"
    igw = call(action, ec2.describe_internet_gateways, InternetGatewayIds=[igw_id])["InternetGateways"][0]
    for attachment in igw.get("Attachments", []):
        call(action, ec2.detach_internet_gateway, InternetGatewayId=igw_id, VpcId=attachment["VpcId"])
    call(action, ec2.delete_internet_gateway, InternetGatewayId=igw_id)


def delete_nat_gateway(aws: AwsClients, region: str, nat_id: str) -> None:
    """DeleteNatGateway (asynchronous)."""
    call(f"delete NAT gateway {nat_id}", aws.ec2(region).delete_nat_gateway, NatGatewayId=nat_id)


def release_address(aws: AwsClients, region: str, allocation_id: str) -> None:
    """ReleaseAddress of an Elastic IP."""
    call(f"release Elastic IP {allocation_id}", aws.ec2(region).release_address, AllocationId=allocation_id)


def delete_vpc_endpoint(aws: AwsClients, region: str, endpoint_id: str) -> None:
    """DeleteVpcEndpoints of one endpoint."""
    call(f"delete VPC endpoint {endpoint_id}", aws.ec2(region).delete_vpc_endpoints, VpcEndpointIds=[endpoint_id])


def delete_subnet(aws: AwsClients, region: str, subnet_id: str) -> None:
    """DeleteSubnet."""
    call(f"delete subnet {subnet_id}", aws.ec2(region).delete_subnet, SubnetId=subnet_id)


def delete_security_group(aws: AwsClients, region: str, group_id: str) -> None:
    """DeleteSecurityGroup."""
    call(f"delete security group {group_id}", aws.ec2(region).delete_security_group, GroupId=group_id)


def delete_vpc(aws: AwsClients, region: str, vpc_id: str) -> None:
    """DeleteVpc."""
    call(f"delete VPC {vpc_id}", aws.ec2(region).delete_vpc, VpcId=vpc_id)
