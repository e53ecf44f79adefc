"""NAT gateways take time as EC2's do (pending → available, deleting → deleted, on the twin clock), a
`nat_gateway_slow` fault stretches that, and the Elastic IP of a NAT gateway that is not yet deleted
cannot be released (AuthFailure, what EC2 answers)."""

from __future__ import annotations

import urllib.error
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import advance, control


def _state(ec2: Any, nat_id: str) -> str:
    return str(ec2.describe_nat_gateways(NatGatewayIds=[nat_id])["NatGateways"][0]["State"])


def test_nat_gateway_lifecycle_and_its_elastic_ip(aws_twin: Twin) -> None:
    ec2 = aws_twin.boto3_client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.61.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.61.0.0/24")["Subnet"]["SubnetId"]
    allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
    assert _state(ec2, nat) == "pending"
    pending = ec2.describe_nat_gateways(Filters=[{"Name": "state", "Values": ["pending"]}])["NatGateways"]
    assert nat in [n["NatGatewayId"] for n in pending]
    advance(aws_twin, 91)
    assert _state(ec2, nat) == "available"

    with pytest.raises(ClientError) as held:
        ec2.release_address(AllocationId=allocation)
    assert held.value.response["Error"]["Code"] == "AuthFailure"

    ec2.delete_nat_gateway(NatGatewayId=nat)
    assert _state(ec2, nat) == "deleting"
    with pytest.raises(ClientError) as deleting:  # still held while the NAT gateway is being deleted
        ec2.release_address(AllocationId=allocation)
    assert deleting.value.response["Error"]["Code"] == "AuthFailure"
    advance(aws_twin, 61)
    assert _state(ec2, nat) == "deleted"
    ec2.release_address(AllocationId=allocation)
    assert allocation not in [a.get("AllocationId") for a in ec2.describe_addresses()["Addresses"]]


def test_slow_nat_gateway_fault(aws_twin: Twin) -> None:
    ec2 = aws_twin.boto3_client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.62.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.62.0.0/24")["Subnet"]["SubnetId"]
    allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
    control(aws_twin, "faults", {"kind": "nat_gateway_slow", "seconds": 900, "count": 2})
    try:
        nat = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
        advance(aws_twin, 600)
        assert _state(ec2, nat) == "pending"
        advance(aws_twin, 301)
        assert _state(ec2, nat) == "available"
        ec2.delete_nat_gateway(NatGatewayId=nat)
        advance(aws_twin, 600)
        assert _state(ec2, nat) == "deleting"
        advance(aws_twin, 301)
        assert _state(ec2, nat) == "deleted"
    finally:
        control(aws_twin, "faults", method="DELETE")


def test_nat_gateway_failure_fault(aws_twin: Twin) -> None:
    """The NAT gateway ends `failed` with the FailureCode and FailureMessage EC2 reports (the model's wording,
    the gateway's own VPC id in it), and no longer holds its Elastic IP."""
    ec2 = aws_twin.boto3_client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.63.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.63.0.0/24")["Subnet"]["SubnetId"]
    allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
    with pytest.raises(urllib.error.HTTPError):  # only EC2's FailureCode values
        control(aws_twin, "faults", {"kind": "nat_gateway_failure", "code": "NoSuchCode"})
    control(aws_twin, "faults", {"kind": "nat_gateway_failure", "code": "Gateway.NotAttached", "count": 1})
    nat = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
    assert _state(ec2, nat) == "pending"
    advance(aws_twin, 91)
    described = ec2.describe_nat_gateways(NatGatewayIds=[nat])["NatGateways"][0]
    assert (described["State"], described["FailureCode"], described["FailureMessage"]) == (
        "failed", "Gateway.NotAttached", f"Network {vpc} has no Internet gateway attached")
    [address] = ec2.describe_addresses(AllocationIds=[allocation])["Addresses"]
    assert "AssociationId" not in address  # free again: it can be reused or released
    ec2.release_address(AllocationId=allocation)
    # The fault was used once: the next NAT gateway becomes available.
    allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
    again = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
    advance(aws_twin, 91)
    assert _state(ec2, again) == "available"
