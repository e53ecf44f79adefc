"""Corrections to moto's EC2 behaviour where the control plane depends on AWS's (moto pinned at 5.2.5).

- DescribeNatGateways: moto honours only the nat-gateway-id, vpc-id, subnet-id and state filters and
  silently ignores `tag:<key>` and `tag-key`, so a search by tag returned every NAT gateway. AWS filters
  by tags; so does the twin now.
"""

from __future__ import annotations

from typing import Any

_INSTALLED = False


def _tag_matches(resource: Any, filters: dict[str, list[str]]) -> bool:
    tags = {t["key"]: t["value"] for t in resource.get_tags()}
    for name, values in filters.items():
        if name.startswith("tag:"):
            if tags.get(name[len("tag:") :]) not in values:
                return False
        elif name == "tag-key" and not any(key in values for key in tags):
            return False
    return True


def install() -> None:
    """Wrap moto's NAT gateway search with tag filtering (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from moto.ec2.models.nat_gateways import NatGatewayBackend

    original = NatGatewayBackend.describe_nat_gateways

    def describe_nat_gateways(self: Any, filters: Any, nat_gateway_ids: list[str] | None) -> list[Any]:
        found: list[Any] = original(self, filters, nat_gateway_ids)
        tag_filters = {k: v for k, v in (filters or {}).items() if k.startswith("tag:") or k == "tag-key"}
        return [n for n in found if _tag_matches(n, tag_filters)] if tag_filters else found

    NatGatewayBackend.describe_nat_gateways = describe_nat_gateways  # type: ignore[method-assign]
    _INSTALLED = True
