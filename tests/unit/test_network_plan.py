"""Address planning: free VPC CIDRs, default subnets, and validation of given CIDRs."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from instantstart.errors import InvalidInput
from instantstart.manifests.network import (
    AddressPlan,
    choose_vpc_cidr,
    next_free_subnet,
    plan_addresses,
    usable_addresses,
    validate_plan,
)


def test_choose_vpc_cidr_avoids_existing() -> None:
    assert choose_vpc_cidr([]) == "10.0.0.0/16"
    assert choose_vpc_cidr(["10.0.0.0/16", "10.1.0.0/16", "10.2.128.0/24"]) == "10.3.0.0/16"
    assert choose_vpc_cidr(["10.0.0.0/8"]) == "172.16.0.0/16"


@given(st.lists(st.integers(min_value=0, max_value=255), max_size=40))
def test_default_plan_is_always_valid_and_disjoint(taken: list[int]) -> None:
    vpc = choose_vpc_cidr([f"10.{i}.0.0/16" for i in taken])
    plan = plan_addresses(vpc)
    validate_plan(plan)
    nets = [ipaddress.ip_network(c) for c in plan.all_subnets()]
    assert all(n.subnet_of(ipaddress.ip_network(vpc)) for n in nets)
    assert ipaddress.ip_network(plan.compute).prefixlen == 20
    assert usable_addresses(plan.compute) == 4091


@pytest.mark.parametrize(
    ("plan", "field", "text"),
    [
        (
            AddressPlan("10.0.0.0/16", ("10.0.0.0/24", "10.0.1.0/24"), ("10.0.2.0/24", "10.0.3.0/24"), "10.0.16.0/24"),
            "hyperPodPrivateSubnetCidr",
            "smaller than /20",
        ),
        (
            AddressPlan("10.0.0.0/16", ("10.0.0.0/24", "10.0.0.0/24"), ("10.0.2.0/24", "10.0.3.0/24"), "10.0.16.0/20"),
            "publicSubnet2Cidr",
            "overlaps publicSubnet1Cidr",
        ),
        (
            AddressPlan("10.0.0.0/16", ("10.1.0.0/24", "10.0.1.0/24"), ("10.0.2.0/24", "10.0.3.0/24"), "10.0.16.0/20"),
            "publicSubnet1Cidr",
            "not inside the VPC",
        ),
        (
            AddressPlan("10.0.0.0/16", ("10.0.0.0/24", "10.0.1.0/24"), ("10.0.2.0/24", "10.0.3.0/24"), "10.0.0.0/20"),
            "hyperPodPrivateSubnetCidr",
            "overlaps",
        ),
        (
            AddressPlan("10.0.0.0/16", ("10.0.0.0/24", "10.0.1.0/24"), ("10.0.2.0/24", "nonsense"), "10.0.16.0/20"),
            "eksPrivateSubnet2Cidr",
            "not a valid IPv4 CIDR",
        ),
        (
            AddressPlan("10.0.0.0/16", ("10.0.0.1/24", "10.0.1.0/24"), ("10.0.2.0/24", "10.0.3.0/24"), "10.0.16.0/20"),
            "publicSubnet1Cidr",
            "host bits set",
        ),
    ],
)
def test_bad_plans_name_the_field(plan: AddressPlan, field: str, text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_plan(plan)
    assert caught.value.message.startswith(f"Invalid input: {field}:")
    assert text in caught.value.message
    assert caught.value.details["fields"][0]["field"] == field


def test_small_vpc_refused_and_next_free_compute_subnet() -> None:
    with pytest.raises(InvalidInput, match="too small"):
        plan_addresses("10.0.0.0/20")
    plan = plan_addresses("10.5.0.0/16")
    assert next_free_subnet("10.5.0.0/16", plan.all_subnets()) == "10.5.32.0/20"
    with pytest.raises(InvalidInput, match="no free /20"):
        next_free_subnet("10.5.0.0/20", ["10.5.0.0/20"])
