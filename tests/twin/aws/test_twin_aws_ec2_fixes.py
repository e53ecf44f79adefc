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
