"""Corrections to moto's EC2 behaviour where the control plane depends on AWS's (moto pinned at 5.2.5).

- DescribeNatGateways: moto honours only the nat-gateway-id, vpc-id, subnet-id and state filters and
  silently ignores `tag:<key>` and `tag-key`, so a search by tag returned every NAT gateway. AWS filters
  by tags; so does the twin now.
- ModifyVpcEndpoint: moto adds a route table to a gateway endpoint's list without the route to the service's
  prefix list (and removes one leaving the route), so DeleteVpcEndpoints then failed with InvalidRoute.NotFound on
  the added table and the endpoint stayed. AWS adds and removes the route with the table; so does the twin now.
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
    """Wrap moto's NAT gateway search with tag filtering and its endpoint route tables with routes (idempotent)."""
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
    _install_endpoint_routes()
    _INSTALLED = True


def _install_endpoint_routes() -> None:
    """ModifyVpcEndpoint adds (removes) the gateway endpoint's prefix-list route with each added (removed) table."""
    from moto.ec2.models.vpcs import VPCBackend

    original = VPCBackend.modify_vpc_endpoint

    def modify_vpc_endpoint(self: Any, **kwargs: Any) -> None:
        endpoint_id = kwargs["vpc_id"]  # moto's name for the VpcEndpointId
        endpoint = self.vpc_end_points.get(endpoint_id)
        had = list(getattr(endpoint, "route_table_ids", None) or [])
        original(self, **kwargs)
        prefix = getattr(endpoint, "destination_prefix_list_id", None)
        if endpoint is None or not prefix or str(endpoint.vpc_endpoint_type).lower() != "gateway":
            return
        for table_id in [t for t in kwargs.get("add_route_tables") or [] if t not in had]:
            self.create_route(table_id, None, gateway_id=endpoint_id, destination_prefix_list_id=prefix)
        for table_id in [t for t in kwargs.get("remove_route_tables") or [] if t in had]:
            self.delete_route(table_id, None, destination_prefix_list_id=prefix)

    VPCBackend.modify_vpc_endpoint = modify_vpc_endpoint  # type: ignore[method-assign,assignment]
