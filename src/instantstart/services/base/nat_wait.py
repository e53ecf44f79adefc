"""Waiting for a new NAT gateway, with EC2's failure explained."""

from __future__ import annotations

from instantstart.aws import ec2_network
from instantstart.context import StageContext
from instantstart.errors import ProviderError
from instantstart.operations.waiting import blocking, wait_until

NAT_TIMEOUT = 15 * 60  # a NAT gateway is usually available within a few minutes
# What to fix for each NatGateway.FailureCode EC2 reports (botocore model).
NAT_FAILURE_HINTS = {
    "InsufficientFreeAddressesInSubnet": "Free addresses in the first public subnet (or pass a VPC whose public "
                                         "subnet has room)",
    "Gateway.NotAttached": "Attach an internet gateway to the VPC",
    "InvalidAllocationID.NotFound": "Check the Elastic IP allocation still exists (and the Elastic IP quota)",
    "Resource.AlreadyAssociated": "Disassociate the Elastic IP from what holds it, or release it",
    "InternalError": "EC2 had an internal error; nothing to fix on your side",
    "InvalidSubnetID.NotFound": "Check the public subnet still exists",
}


async def wait_nat(stage: StageContext, region: str, nat_id: str) -> None:
    """Until the NAT gateway is available (it is created pending): nodes in the private subnets need it."""

    async def ready() -> tuple[bool, str]:
        nat = await blocking(ec2_network.nat_gateway, stage.app.aws, region, nat_id) or {}
        state = nat.get("State")
        if state not in ("pending", "available"):
            code, why = nat.get("FailureCode"), nat.get("FailureMessage")
            reason = f" ({code}: {why})" if code or why else ""
            raise ProviderError(
                f"NAT gateway {nat_id} is {state or 'gone'}{reason}; the private subnets have no route to the "
                "internet.",
                hint=NAT_FAILURE_HINTS.get(str(code), "Fix what EC2's FailureMessage names")
                + ", then operation_retry (a new NAT gateway is created; the failed one is left for EC2 to remove).",
                # Only EC2's own internal error can pass by itself; the others need the fix the hint names.
                retryable=code in (None, "InternalError"),
                details={"natGatewayId": nat_id, "state": state, "failureCode": code, "failureMessage": why},
            )
        return state == "available", f"NAT gateway {nat_id}: {state}"

    await wait_until(stage, ready, limit_seconds=NAT_TIMEOUT, what=f"NAT gateway {nat_id}")
