"""Name rules checked before anything is built: cluster tags, Kubernetes names, AWS names."""

from __future__ import annotations

import ipaddress
import re
from functools import cache
from typing import Annotated, Any

from botocore.loaders import create_loader
from pydantic import AfterValidator, Field

CLUSTER_TAG_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")


def _cluster_tag(value: str) -> str:
    if not CLUSTER_TAG_RE.match(value):
        raise ValueError("must be 1-32 lowercase letters, digits or '-', starting and ending with a letter or digit")
    return value


def _dns_label(value: str) -> str:
    if not DNS1123_LABEL_RE.match(value):
        raise ValueError("must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters")
    return value


PARTITIONS = ("aws", "aws-cn", "aws-us-gov")


@cache
def known_regions() -> frozenset[str]:
    """Regions botocore's bundled endpoint data knows (no network call): EC2's regional endpoints in the three
    partitions, as `Session.get_available_regions("ec2", partition)` lists them, read straight from the data
    file (a boto3 Session for this left ~7 MB resident behind in an idle control plane, ~2 MB this way)."""
    data: dict[str, Any] = create_loader().load_data("endpoints")
    names: set[str] = set()
    for partition in data["partitions"]:
        if partition["partition"] in PARTITIONS:
            regions = partition["regions"]
            endpoints = partition["services"].get("ec2", {}).get("endpoints", {})
            names.update(name for name in endpoints if name in regions)
    return frozenset(names)


def _region(value: str) -> str:
    if not REGION_RE.match(value) or value not in known_regions():
        raise ValueError("must be an AWS Region name such as us-west-2")
    return value


# The pattern is published in the JSON Schema (so clients and fuzzers see the rule); the validator
# gives the readable message every face shows.
ClusterTag = Annotated[
    str,
    Field(
        description="Cluster tag: 1-32 lowercase letters, digits or hyphens.",
        json_schema_extra={"pattern": CLUSTER_TAG_RE.pattern},
    ),
    AfterValidator(_cluster_tag),
]
KubeName = Annotated[
    str,
    Field(description="A Kubernetes DNS-1123 label.", json_schema_extra={"pattern": DNS1123_LABEL_RE.pattern}),
    AfterValidator(_dns_label),
]
Region = Annotated[
    str,
    Field(description="AWS Region, e.g. us-west-2.", json_schema_extra={"pattern": REGION_RE.pattern}),
    AfterValidator(_region),
]


def cidr(field: str, largest: int, smallest: int, what: str) -> Any:
    """An IPv4 CIDR type whose prefix length lies in [largest, smallest] (e.g. /16-/18), checked before any
    address arithmetic so no request can make the server enumerate a huge network."""

    def check(value: str) -> str:
        try:
            net = ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"must be an IPv4 CIDR such as 10.1.0.0/{largest} ({str(exc)[:120]})") from None
        if not isinstance(net, ipaddress.IPv4Network):
            raise ValueError("only IPv4 CIDRs are supported")
        if not largest <= net.prefixlen <= smallest:
            raise ValueError(f"prefix /{net.prefixlen} is outside /{largest}-/{smallest} allowed for {field}")
        return str(net)

    return Annotated[
        str,
        Field(
            max_length=18,
            description=f"{what} (/{largest}-/{smallest}), e.g. 10.1.0.0/{largest}.",
            json_schema_extra={"pattern": r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$"},
        ),
        AfterValidator(check),
    ]


# AWS: a VPC is /16-/28; a HyperPod plan needs room for two /24s, two /24s and a /20, hence /18 at most.
VpcCidr = cidr("vpcCidr", 16, 18, "CIDR of a new VPC")
# AWS subnets are /16-/28; inside a /16-/18 VPC a public or EKS subnet is /17-/28 in practice.
SubnetCidr = cidr("subnet", 16, 28, "CIDR of a subnet inside vpcCidr")
# HyperPod compute subnets need /20 or larger (each node and pod takes an address).
ComputeSubnetCidr = cidr("hyperPodPrivateSubnetCidr", 16, 20, "CIDR of the HyperPod compute subnet")
# Who may reach a cluster's public Kubernetes API endpoint (any prefix: 0.0.0.0/0 only when asked for).
AccessCidr = cidr("endpointPublicAccessCidrs", 0, 32, "CIDR allowed to reach the public Kubernetes API endpoint")
# Who may reach an external model server's load balancer: any IPv4 range but the whole internet (/0).
SourceRange = cidr("sourceRanges", 1, 32, "CIDR allowed to reach the model server's load balancer")

# A model server's invocation path (InferenceEndpointConfig.spec.invocationEndpoint): 1-8 segments of letters,
# digits, '-' and '_' joined by '/'. No '.', '..', '%', '?', '#', '\\' or empty segment can pass, so a path
# appended to the API server's service proxy URL can never climb out of the Service (to /api/v1/nodes/…/proxy).
INVOCATION_PATH_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}(/[A-Za-z0-9_-]{1,64}){0,7}$")
INVOCATION_PATH_RULE = "1-8 segments of letters, digits, '-' or '_' joined by '/' (no '.', '%', '?', '#')"


def invocation_path(value: str) -> str:
    """The invocation path without its leading '/', or ValueError naming the rule (e.g. `v1/chat/completions`)."""
    path = value[1:] if value.startswith("/") else value
    if len(path) > 256 or not INVOCATION_PATH_RE.match(path):
        raise ValueError(f"must be {INVOCATION_PATH_RULE}, e.g. v1/chat/completions or invocations")
    return path


InvocationPath = Annotated[
    str,
    Field(max_length=257, description=f"Model server path: {INVOCATION_PATH_RULE}, e.g. v1/chat/completions.",
          json_schema_extra={"pattern": r"^/?[A-Za-z0-9_-]{1,64}(/[A-Za-z0-9_-]{1,64}){0,7}$"}),
    AfterValidator(invocation_path),
]
