"""Service Quotas: the applied quota values of a service, by name."""

from __future__ import annotations

from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call


def quota_values(
    aws: AwsClients, region: str, services: tuple[str, ...] = ("sagemaker", "vpc", "ec2")
) -> dict[str, float]:
    """QuotaName → Value over every page of ListServiceQuotas for each service code."""
    sq = aws.quotas(region)
    names: dict[str, float] = {}
    for service in services:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ServiceCode": service, "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            page = call(f"list {service} quotas", sq.list_service_quotas, **kwargs)
            for quota in page.get("Quotas", []):
                names[quota["QuotaName"]] = float(quota["Value"])
            token = page.get("NextToken")
            if not token:
                break
    return names
