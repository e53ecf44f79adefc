"""Name rules checked before anything is built: cluster tags, Kubernetes names, AWS names."""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated

import boto3
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


@cache
def known_regions() -> frozenset[str]:
    """Regions botocore's bundled endpoint data knows (no network call)."""
    session = boto3.session.Session()
    names: set[str] = set()
    for partition in ("aws", "aws-cn", "aws-us-gov"):
        names.update(session.get_available_regions("ec2", partition_name=partition))
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
