"""EC2 calls that build a cluster network: VPC, subnets, gateways, routes, S3 endpoint, security group."""

from __future__ import annotations

from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call

Filters = list[dict[str, Any]]
Tags = list[dict[str, Any]]


def _items(answer: Any, key: str) -> list[dict[str, Any]]:
    return cast("list[dict[str, Any]]", answer[key])


def find_vpcs(
    aws: AwsClients, region: str, filters: Filters | None = None, ids: list[str] | None = None
) -> list[dict[str, Any]]:
    """DescribeVpcs by filters and/or ids (every VPC of the Region when neither is given)."""
    kwargs: dict[str, Any] = {}
    if filters is not None:
        kwargs["Filters"] = filters
    if ids is not None:
        kwargs["VpcIds"] = ids
    return _items(call("describe VPCs", aws.ec2(region).describe_vpcs, **kwargs), "Vpcs")


def create_vpc(aws: AwsClients, region: str, cidr: str, tags: Tags) -> str:
    """CreateVpc; the VPC id (turn DNS on with enable_vpc_dns)."""
    answer = call("create VPC", aws.ec2(region).create_vpc, CidrBlock=cidr, TagSpecifications=cast(Any, tags))
    return str(answer["Vpc"]["VpcId"])


def enable_vpc_dns(aws: AwsClients, region: str, vpc_id: str) -> None:
    """DNS support and DNS hostnames on (one ModifyVpcAttribute each)."""
    ec2 = aws.ec2(region)
    call("enable VPC DNS", ec2.modify_vpc_attribute, VpcId=vpc_id, EnableDnsSupport={"Value": True})
    call("enable VPC DNS", ec2.modify_vpc_attribute, VpcId=vpc_id, EnableDnsHostnames={"Value": True})


def vpc_dns(aws: AwsClients, region: str, vpc_id: str) -> dict[str, bool]:
    """DescribeVpcAttribute: whether DNS support and DNS hostnames are on ({enableDnsSupport, enableDnsHostnames})."""
    ec2 = aws.ec2(region)
    read = "read VPC DNS attributes"
    support = call(read, ec2.describe_vpc_attribute, VpcId=vpc_id, Attribute="enableDnsSupport")
    hostnames = call(read, ec2.describe_vpc_attribute, VpcId=vpc_id, Attribute="enableDnsHostnames")
    return {
        "enableDnsSupport": bool(support["EnableDnsSupport"]["Value"]),
        "enableDnsHostnames": bool(hostnames["EnableDnsHostnames"]["Value"]),
    }


def find_subnets(
    aws: AwsClients, region: str, filters: Filters | None = None, ids: list[str] | None = None
) -> list[dict[str, Any]]:
    """DescribeSubnets by filters or ids."""
    kwargs: dict[str, Any] = {"Filters": filters} if filters is not None else {}
    if ids is not None:
        kwargs["SubnetIds"] = ids
    return _items(call("describe subnets", aws.ec2(region).describe_subnets, **kwargs), "Subnets")


def create_subnet(aws: AwsClients, region: str, *, vpc_id: str, cidr: str, az: str, tags: Tags) -> str:
    """CreateSubnet; the subnet id."""
    subnet = call(
        f"create subnet {cidr}",
        aws.ec2(region).create_subnet,
        VpcId=vpc_id,
        CidrBlock=cidr,
        AvailabilityZone=az,
        TagSpecifications=cast(Any, tags),
    )["Subnet"]
    return str(subnet["SubnetId"])


def map_public_ips(aws: AwsClients, region: str, subnet_id: str) -> None:
    """ModifySubnetAttribute: instances launched in the subnet get public IPs."""
    call(
        "map public IPs",
        aws.ec2(region).modify_subnet_attribute,
        SubnetId=subnet_id,
        MapPublicIpOnLaunch={"Value": True},
    )


def find_internet_gateways(aws: AwsClients, region: str, vpc_id: str) -> list[dict[str, Any]]:
    """The internet gateways attached to the VPC."""
    answer = call(
        "find internet gateway",
        aws.ec2(region).describe_internet_gateways,
        Filters=[{"Name": "attachment.vpc-id", "Values": [vpc_id]}],
    )
    return _items(answer, "InternetGateways")


def create_internet_gateway(aws: AwsClients, region: str, tags: Tags) -> str:
    """CreateInternetGateway; returns its id (attach it with attach_internet_gateway)."""
    answer = call("create internet gateway", aws.ec2(region).create_internet_gateway, TagSpecifications=cast(Any, tags))
    return str(answer["InternetGateway"]["InternetGatewayId"])


def attach_internet_gateway(aws: AwsClients, region: str, igw_id: str, vpc_id: str) -> None:
    """AttachInternetGateway."""
    call("attach internet gateway", aws.ec2(region).attach_internet_gateway, InternetGatewayId=igw_id, VpcId=vpc_id)


def find_nat_gateways(aws: AwsClients, region: str, filters: Filters) -> list[dict[str, Any]]:
    """DescribeNatGateways by filters."""
    return _items(call("find NAT gateway", aws.ec2(region).describe_nat_gateways, Filters=filters), "NatGateways")


def find_addresses(aws: AwsClients, region: str, filters: Filters) -> list[dict[str, Any]]:
    """DescribeAddresses (Elastic IPs) by filters."""
    return _items(call("find Elastic IP", aws.ec2(region).describe_addresses, Filters=filters), "Addresses")


def allocate_address(aws: AwsClients, region: str, tags: Tags) -> str:
    """AllocateAddress in the VPC domain; the allocation id."""
    answer = call(
        "allocate NAT address", aws.ec2(region).allocate_address, Domain="vpc", TagSpecifications=cast(Any, tags)
    )
    return str(answer["AllocationId"])


def create_nat_gateway(aws: AwsClients, region: str, *, subnet_id: str, allocation_id: str, tags: Tags) -> str:
    """CreateNatGateway (public, with the Elastic IP); its id."""
    answer = call(
        "create NAT gateway",
        aws.ec2(region).create_nat_gateway,
        SubnetId=subnet_id,
        AllocationId=allocation_id,
        TagSpecifications=cast(Any, tags),
    )
    return str(answer["NatGateway"]["NatGatewayId"])


def find_route_tables(aws: AwsClients, region: str, filters: Filters) -> list[dict[str, Any]]:
    """DescribeRouteTables by filters."""
    return _items(call("find route table", aws.ec2(region).describe_route_tables, Filters=filters), "RouteTables")


def create_route_table(aws: AwsClients, region: str, vpc_id: str, tags: Tags) -> dict[str, Any]:
    """CreateRouteTable; the table."""
    answer = call(
        "create route table", aws.ec2(region).create_route_table, VpcId=vpc_id, TagSpecifications=cast(Any, tags)
    )
    return cast("dict[str, Any]", answer["RouteTable"])


def create_default_route(
    aws: AwsClients, region: str, table_id: str, *, gateway_id: str | None, nat_gateway_id: str | None
) -> None:
    """CreateRoute 0.0.0.0/0 to the internet gateway, else to the NAT gateway."""
    target = {"GatewayId": gateway_id} if gateway_id else {"NatGatewayId": nat_gateway_id}
    call(
        "add default route",
        aws.ec2(region).create_route,
        RouteTableId=table_id,
        DestinationCidrBlock="0.0.0.0/0",
        **cast(Any, target),
    )


def replace_route_table_association(aws: AwsClients, region: str, association_id: str, table_id: str) -> None:
    """ReplaceRouteTableAssociation: move a subnet onto `table_id`."""
    call(
        "replace subnet route table",
        aws.ec2(region).replace_route_table_association,
        AssociationId=association_id,
        RouteTableId=table_id,
    )


def associate_route_table(aws: AwsClients, region: str, table_id: str, subnet_id: str) -> None:
    """AssociateRouteTable."""
    call("associate route table", aws.ec2(region).associate_route_table, RouteTableId=table_id, SubnetId=subnet_id)


def find_vpc_endpoints(
    aws: AwsClients, region: str, filters: Filters | None = None, ids: list[str] | None = None
) -> list[dict[str, Any]]:
    """DescribeVpcEndpoints by filters or ids."""
    kwargs: dict[str, Any] = {"Filters": filters} if filters is not None else {}
    if ids is not None:
        kwargs["VpcEndpointIds"] = ids
    return _items(call("describe VPC endpoints", aws.ec2(region).describe_vpc_endpoints, **kwargs), "VpcEndpoints")


def add_endpoint_route_tables(aws: AwsClients, region: str, endpoint_id: str, table_ids: list[str]) -> None:
    """ModifyVpcEndpoint: associate route tables with a gateway endpoint."""
    call(
        "associate S3 endpoint",
        aws.ec2(region).modify_vpc_endpoint,
        VpcEndpointId=endpoint_id,
        AddRouteTableIds=table_ids,
    )


def create_gateway_endpoint(
    aws: AwsClients, region: str, *, vpc_id: str, service: str, table_ids: list[str], tags: Tags
) -> str:
    """CreateVpcEndpoint of type Gateway; its id."""
    answer = call(
        f"create {service} endpoint",
        aws.ec2(region).create_vpc_endpoint,
        VpcId=vpc_id,
        ServiceName=service,
        VpcEndpointType="Gateway",
        RouteTableIds=table_ids,
        TagSpecifications=cast(Any, tags),
    )
    return str(answer["VpcEndpoint"]["VpcEndpointId"])


def find_security_groups(
    aws: AwsClients, region: str, filters: Filters | None = None, ids: list[str] | None = None
) -> list[dict[str, Any]]:
    """DescribeSecurityGroups by filters or ids."""
    kwargs: dict[str, Any] = {"Filters": filters} if filters is not None else {}
    if ids is not None:
        kwargs["GroupIds"] = ids
    answer = call("describe security groups", aws.ec2(region).describe_security_groups, **kwargs)
    return _items(answer, "SecurityGroups")


def create_security_group(aws: AwsClients, region: str, *, vpc_id: str, name: str, description: str, tags: Tags) -> str:
    """CreateSecurityGroup; its id."""
    answer = call(
        "create security group",
        aws.ec2(region).create_security_group,
        VpcId=vpc_id,
        GroupName=name,
        Description=description,
        TagSpecifications=cast(Any, tags),
    )
    return str(answer["GroupId"])


def allow_all_from_self(aws: AwsClients, region: str, group_id: str) -> None:
    """AuthorizeSecurityGroupIngress: all traffic from the group itself."""
    call(
        "allow intra-cluster traffic",
        aws.ec2(region).authorize_security_group_ingress,
        GroupId=group_id,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}],
    )


LUSTRE_PORTS = ((988, 988), (1018, 1023))


def allow_lustre(aws: AwsClients, region: str, group_id: str, sources: list[str]) -> None:
    """AuthorizeSecurityGroupIngress: Lustre (TCP 988 and 1018-1023) from the group itself (FSx servers talk to
    each other) and from each source group (the cluster's nodes). Rules already present are skipped."""
    group = find_security_groups(aws, region, ids=[group_id])[0]
    have = {
        (p.get("FromPort"), p.get("ToPort"), g.get("GroupId"))
        for p in group.get("IpPermissions", [])
        if p.get("IpProtocol") == "tcp"
        for g in p.get("UserIdGroupPairs", [])
    }
    wanted = []
    for low, high in LUSTRE_PORTS:
        pairs = [{"GroupId": g} for g in dict.fromkeys([group_id, *sources]) if (low, high, g) not in have]
        if pairs:
            wanted.append({"IpProtocol": "tcp", "FromPort": low, "ToPort": high, "UserIdGroupPairs": pairs})
    if wanted:
        call(
            f"allow Lustre traffic into {group_id}",
            aws.ec2(region).authorize_security_group_ingress,
            GroupId=group_id,
            IpPermissions=cast(Any, wanted),
        )
