"""Elastic Load Balancing v2: finding and deleting the load balancers a cluster's Services own."""

from __future__ import annotations

from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call


def load_balancer_tags(aws: AwsClients, region: str) -> dict[str, dict[str, str]]:
    """Every load balancer of the Region → its tags."""
    elbv2 = aws.elbv2(region)
    pages = elbv2.get_paginator("describe_load_balancers").paginate()
    listed: list[Any] = call("list load balancers", list, pages)
    arns = [lb["LoadBalancerArn"] for page in listed for lb in page.get("LoadBalancers", [])]
    found: dict[str, dict[str, str]] = {}
    for start in range(0, len(arns), 20):
        answer = call("read load balancer tags", elbv2.describe_tags, ResourceArns=arns[start : start + 20])
        for description in answer.get("TagDescriptions", []):
            found[description["ResourceArn"]] = {t["Key"]: t.get("Value", "") for t in description.get("Tags", [])}
    return found


def delete_load_balancer(aws: AwsClients, region: str, arn: str) -> None:
    """DeleteLoadBalancer."""
    call(f"delete load balancer {arn}", aws.elbv2(region).delete_load_balancer, LoadBalancerArn=arn)
