"""NAT gateways as EC2 runs them: pending → available (or, under the `nat_gateway_failure` fault, → failed
with EC2's FailureCode/FailureMessage) and deleting → deleted on the twin clock, and an Elastic IP a NAT
gateway still holds cannot be released (AuthFailure, as AWS answers)."""

from __future__ import annotations

import contextlib
from typing import Any

from .context import AwsContext
from .protocol import AwsError, AwsRequest

NAT_CREATE = 90.0  # twin seconds pending → available (AWS: typically one to a few minutes)
NAT_DELETE = 60.0  # twin seconds deleting → deleted
_HOOKS: dict[str, Any] = {}
# NatGateway.FailureMessage for each FailureCode, as the EC2 API reference words them.
_FAILURE_MESSAGES = {
    "InsufficientFreeAddressesInSubnet": "Subnet has insufficient free addresses to create this NAT gateway",
    "Gateway.NotAttached": "Network {vpc} has no Internet gateway attached",
    "InvalidAllocationID.NotFound": "Elastic IP address {allocation} could not be associated with this NAT gateway",
    "Resource.AlreadyAssociated": "Elastic IP address {allocation} is already associated",
    "InternalError": "Network interface {eni}, created and used internally by this NAT gateway is in an invalid "
                     "state. Please try again.",
    "InvalidSubnetID.NotFound": "The specified subnet {subnet} does not exist or could not be found.",
}


def _fail(nat: Any, code: str, message: str | None) -> None:
    """The NAT gateway ends `failed`, as EC2 shows it: FailureCode/FailureMessage, its address released."""
    allocation = next((a.get("allocationId") for a in nat.address_set if a.get("allocationId")), "")
    eni = getattr(getattr(nat, "_eni", None), "id", "")
    nat.state = "failed"
    for address in nat.address_set:  # EC2 disassociates the Elastic IP of a NAT gateway that failed
        if address.get("publicIp"):
            with contextlib.suppress(Exception):
                nat.ec2_backend.disassociate_address(address=address["publicIp"])
    nat.failure_code = code
    nat.failure_message = message or _FAILURE_MESSAGES[code].format(
        vpc=nat.vpc_id, allocation=allocation, eni=eni, subnet=nat.subnet_id)


def _delay(ctx: AwsContext, default: float) -> float:
    """The `nat_gateway_slow` fault's seconds (consuming one use), else the default."""
    fault = ctx.faults.lifecycle("nat_gateway_slow")
    return float(fault.seconds) if fault is not None and fault.seconds is not None else default


def _holder(ctx: AwsContext, region: str, allocation_id: str, public_ip: str) -> str | None:
    """The NAT gateway (not yet deleted) whose address is this allocation or IP."""
    for nat in ctx.ec2(region).nat_gateways.values():
        if nat.state in ("deleted", "failed"):  # a failed NAT gateway holds no address
            continue
        for address in nat.address_set:
            if (allocation_id and address.get("allocationId") == allocation_id) or (
                public_ip and address.get("publicIp") == public_ip
            ):
                return str(nat.id)
    return None


def register(ctx: AwsContext) -> None:
    """Make moto's NAT gateways take time (the current context's clock and faults) and guard ReleaseAddress."""
    from moto.ec2.models.nat_gateways import NatGatewayBackend

    _HOOKS["ctx"] = ctx
    if "create" not in _HOOKS:  # moto's classes are process-wide: wrap them once, read the context late
        _HOOKS["create"] = NatGatewayBackend.create_nat_gateway
        _HOOKS["delete"] = NatGatewayBackend.delete_nat_gateway

        def create_nat_gateway(self: Any, *args: Any, **kwargs: Any) -> Any:
            nat = _HOOKS["create"](self, *args, **kwargs)
            now: AwsContext = _HOOKS["ctx"]
            nat.state = "pending"
            failure = now.faults.lifecycle("nat_gateway_failure")

            def available() -> None:
                if nat.state == "pending" and failure is not None:
                    _fail(nat, failure.code or "InsufficientFreeAddressesInSubnet", failure.message)
                elif nat.state == "pending":
                    nat.state = "available"

            now.later(_delay(now, NAT_CREATE), available)
            return nat

        def delete_nat_gateway(self: Any, nat_gateway_id: str) -> Any:
            nat = self.nat_gateways.get(nat_gateway_id)
            if nat is None:
                return _HOOKS["delete"](self, nat_gateway_id)
            if nat.state in ("deleting", "deleted"):
                return nat
            now: AwsContext = _HOOKS["ctx"]
            nat.state = "deleting"

            def deleted() -> None:
                if nat.state == "deleting":
                    nat.state = "deleted"

            now.later(_delay(now, NAT_DELETE), deleted)
            return nat

        NatGatewayBackend.create_nat_gateway = create_nat_gateway  # type: ignore[method-assign]
        NatGatewayBackend.delete_nat_gateway = delete_nat_gateway  # type: ignore[method-assign]

    def release_guard(req: AwsRequest) -> None:
        allocation = str(req.params.get("AllocationId") or "")
        ip = str(req.params.get("PublicIp") or "")
        if _holder(ctx, req.region, allocation, ip) is not None:
            # What EC2 answers while a NAT gateway (even one being deleted) holds the address.
            raise AwsError("AuthFailure", "You do not have permission to access the specified resource.")

    ctx.guards[("ec2", "ReleaseAddress")] = release_guard
