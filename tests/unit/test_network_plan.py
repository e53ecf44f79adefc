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
    free_block,
    next_free_subnet,
    plan_addresses,
    plan_in_free_space,
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


def test_plan_in_free_space_fits_beside_the_operators_subnets() -> None:
    theirs = ["10.60.0.0/24", "10.60.1.0/24", "10.60.16.0/20", "10.60.32.0/20"]
    plan = plan_in_free_space(["10.60.0.0/16"], theirs)
    assert plan is not None and plan.vpc == "10.60.0.0/16"
    # The /20 compute subnet first (the lowest free one), then the four /24s in the lowest gaps.
    assert plan.compute == "10.60.48.0/20"
    assert plan.public == ("10.60.2.0/24", "10.60.3.0/24") and plan.eks_private == ("10.60.4.0/24", "10.60.5.0/24")
    mine = [ipaddress.ip_network(c) for c in plan.all_subnets()]
    assert not any(a.overlaps(ipaddress.ip_network(b)) for a in mine for b in theirs)


def test_plan_in_free_space_shrinks_the_small_subnets_then_uses_secondary_blocks_then_gives_up() -> None:
    # A /19 with half used: the compute /20 takes the other half; no /24 is left, so nothing fits.
    assert plan_in_free_space(["10.1.0.0/19"], ["10.1.0.0/20"]) is None
    # With a /22 of room left beside the compute subnet the small subnets are /24s; with a /26 of room, /28s.
    roomy = plan_in_free_space(["10.2.0.0/19"], ["10.2.0.0/21", "10.2.12.0/22"])
    assert roomy is not None and roomy.compute == "10.2.16.0/20" and roomy.public[0].endswith("/24")
    tight = plan_in_free_space(["10.3.0.0/19"], ["10.3.0.0/21", "10.3.8.0/22", "10.3.12.0/23", "10.3.14.0/24",
                                                "10.3.15.0/25", "10.3.15.128/26"])
    assert tight is not None and tight.public == ("10.3.15.192/28", "10.3.15.208/28")
    assert tight.eks_private == ("10.3.15.224/28", "10.3.15.240/28")
    # A secondary CIDR block is room too (the primary's /20 is full).
    both = plan_in_free_space(["10.4.0.0/20", "10.5.0.0/16"], ["10.4.0.0/24"])
    assert both is not None and both.compute == "10.5.0.0/20" and both.public[0] == "10.4.1.0/24"
    assert free_block(["10.4.0.0/24"], [], 20) is None  # a block smaller than the prefix holds none
