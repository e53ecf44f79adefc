"""NAT gateways as EC2 runs them: pending → available and deleting → deleted on the twin clock, and an
Elastic IP a NAT gateway still holds cannot be released (AuthFailure, as AWS answers)."""

from __future__ import annotations

from typing import Any

from .context import AwsContext
from .protocol import AwsError, AwsRequest

NAT_CREATE = 90.0  # twin seconds pending → available (AWS: typically one to a few minutes)
NAT_DELETE = 60.0  # twin seconds deleting → deleted
_HOOKS: dict[str, Any] = {}


def _delay(ctx: AwsContext, default: float) -> float:
    """The `nat_gateway_slow` fault's seconds (consuming one use), else the default."""
    fault = ctx.faults.lifecycle("nat_gateway_slow")
    return float(fault.seconds) if fault is not None and fault.seconds is not None else default


def _holder(ctx: AwsContext, region: str, allocation_id: str, public_ip: str) -> str | None:
    """The NAT gateway (not yet deleted) whose address is this allocation or IP."""
    for nat in ctx.ec2(region).nat_gateways.values():
        if nat.state == "deleted":
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

            def available() -> None:
                if nat.state == "pending":
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
