"""Where the twin corrects moto's EC2 answers: NAT gateways filtered by tag, as AWS does."""

from __future__ import annotations

from hyperpod_twin.twin import Twin


def test_nat_gateways_filter_by_tag(twin: Twin) -> None:
    ec2 = twin.boto3_client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.61.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.61.0.0/24")["Subnet"]["SubnetId"]
    ids = {}
    for owner in ("a", "b"):
        allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
        nat = ec2.create_nat_gateway(
            SubnetId=subnet,
            AllocationId=allocation,
            TagSpecifications=[{"ResourceType": "natgateway", "Tags": [{"Key": "owner", "Value": owner}]}],
        )["NatGateway"]["NatGatewayId"]
        ids[owner] = nat
    by_tag = ec2.describe_nat_gateways(Filters=[{"Name": "tag:owner", "Values": ["a"]}])["NatGateways"]
    assert [n["NatGatewayId"] for n in by_tag] == [ids["a"]]
    by_key = ec2.describe_nat_gateways(Filters=[{"Name": "tag-key", "Values": ["owner"]}])["NatGateways"]
    assert {n["NatGatewayId"] for n in by_key} == set(ids.values())
    none = ec2.describe_nat_gateways(Filters=[{"Name": "tag:owner", "Values": ["c"]}])["NatGateways"]
    assert none == []
    in_vpc = ec2.describe_nat_gateways(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["NatGateways"]
    assert len(in_vpc) == 2


def test_a_route_table_added_to_a_gateway_endpoint_gets_its_route_and_deletion_removes_it(twin: Twin) -> None:
    ec2 = twin.boto3_client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.62.0.0/16")["Vpc"]["VpcId"]
    first, added = (ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"] for _ in range(2))
    endpoint = ec2.create_vpc_endpoint(VpcId=vpc, ServiceName="com.amazonaws.us-west-2.s3",
                                       VpcEndpointType="Gateway", RouteTableIds=[first])["VpcEndpoint"]
    ec2.modify_vpc_endpoint(VpcEndpointId=endpoint["VpcEndpointId"], AddRouteTableIds=[added])

    def endpoint_routes(table: str) -> list[str]:
        routes = ec2.describe_route_tables(RouteTableIds=[table])["RouteTables"][0]["Routes"]
        return [r["DestinationPrefixListId"] for r in routes if r.get("GatewayId") == endpoint["VpcEndpointId"]]

    assert endpoint_routes(added) == endpoint_routes(first) != []
    ec2.modify_vpc_endpoint(VpcEndpointId=endpoint["VpcEndpointId"], RemoveRouteTableIds=[added])
    assert endpoint_routes(added) == []
    ec2.modify_vpc_endpoint(VpcEndpointId=endpoint["VpcEndpointId"], AddRouteTableIds=[added])
    ec2.delete_vpc_endpoints(VpcEndpointIds=[endpoint["VpcEndpointId"]])  # refused before: the route was missing
    state = ec2.describe_vpc_endpoints(VpcEndpointIds=[endpoint["VpcEndpointId"]])["VpcEndpoints"][0]["State"]
    assert state.lower() == "deleted" and endpoint_routes(added) == endpoint_routes(first) == []
