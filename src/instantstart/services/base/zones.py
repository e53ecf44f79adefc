"""Availability Zone validation shared by every tool that places nodes (read once per cache interval)."""

from __future__ import annotations

from instantstart.aws import ec2_network
from instantstart.context import CallContext
from instantstart.errors import InvalidInput
from instantstart.operations.waiting import blocking


async def validate_zone(ctx: CallContext, region: str, az: str, field: str = "availabilityZone") -> None:
    """The AZ must belong to the Region (checked against EC2, cached)."""

    async def fetch() -> list[dict[str, str]]:
        return await blocking(ec2_network.availability_zones, ctx.app.aws, region)

    zones = await ctx.app.cache.get(f"azs:{region}", fetch)
    names = [z["name"] for z in zones]
    if az not in names:
        raise InvalidInput(
            f"Invalid input: {field}: {az} is not an Availability Zone of {region}",
            hint=f"Choose one of {', '.join(names)}.",
            details={"fields": [{"field": field, "message": f"not in {region}"}]},
        )
