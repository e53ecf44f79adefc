"""Service Quotas: SageMaker "<type> for cluster usage" and EC2/VPC/EKS limits, settable and enforced."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from . import instance_types
from .context import AwsContext
from .protocol import AwsError, AwsRequest, RawResponse, json_response, page

SERVICE_NAMES = {
    "sagemaker": "Amazon SageMaker",
    "ec2": "Amazon Elastic Compute Cloud (Amazon EC2)",
    "vpc": "Amazon Virtual Private Cloud (Amazon VPC)",
    "eks": "Amazon Elastic Kubernetes Service (Amazon EKS)",
    "fsx": "Amazon FSx",
}

TOTAL_HYPERPOD = "Total number of instances allowed across SageMaker HyperPod clusters"
PER_CLUSTER_HYPERPOD = "Maximum number of instances allowed per SageMaker HyperPod cluster"

# (service, code, name, default) for the non-SageMaker-instance quotas the control plane may check.
# Codes of the EC2/VPC/EKS quotas are the public ones; SageMaker per-type codes are derived stably.
_FIXED: list[tuple[str, str, str, float]] = [
    ("vpc", "L-F678F1CE", "VPCs per Region", 5),
    ("vpc", "L-A4707A72", "Internet gateways per Region", 5),
    ("vpc", "L-FE5A380F", "NAT gateways per Availability Zone", 5),
    ("vpc", "L-407747CB", "Subnets per VPC", 200),
    ("vpc", "L-1B52E74A", "Gateway VPC endpoints per Region", 20),
    ("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs", 5),
    ("ec2", "L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 640),
    ("ec2", "L-DB2E81BA", "Running On-Demand G and VT instances", 384),
    ("ec2", "L-417A185B", "Running On-Demand P instances", 384),
    ("eks", "L-1194D53C", "Clusters", 100),
    ("eks", "L-6D54EA21", "Managed node groups per cluster", 30),
    ("fsx", "L-1216C47B", "Lustre file systems per account", 100),
    ("sagemaker", "L-3D0A9E1C", TOTAL_HYPERPOD, 100),
    ("sagemaker", "L-9A2F6C4B", PER_CLUSTER_HYPERPOD, 100),
]


def _code(name: str) -> str:
    return "L-" + hashlib.sha1(name.encode()).hexdigest()[:8].upper()  # noqa: S324 - not for security


def cluster_usage_name(instance_type: str) -> str:
    """The SageMaker quota name for HyperPod usage of one instance type."""
    return f"{instance_type} for cluster usage"


@dataclass
class Quota:
    """One quota: its code, name, AWS default and current (possibly raised) value."""

    service: str
    code: str
    name: str
    default: float
    value: float

    def shape(self, account_id: str, region: str, *, default: bool = False) -> dict[str, Any]:
        """ServiceQuota shape."""
        return {
            "ServiceCode": self.service,
            "ServiceName": SERVICE_NAMES[self.service],
            "QuotaArn": f"arn:aws:servicequotas:{region}:{account_id}:{self.service}/{self.code}",
            "QuotaCode": self.code,
            "QuotaName": self.name,
            "Value": self.default if default else self.value,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
            "QuotaAppliedAtLevel": "ACCOUNT",
        }


class Quotas:
    """The account's quotas (one set, applied to every Region)."""

    def __init__(self, ctx: AwsContext) -> None:
        self.ctx = ctx
        self.items: dict[tuple[str, str], Quota] = {}
        self.requests: dict[str, dict[str, Any]] = {}
        self.reset()

    def reset(self) -> None:
        """Back to AWS defaults."""
        self.items.clear()
        self.requests.clear()
        for service, code, name, default in _FIXED:
            self.items[(service, code)] = Quota(service, code, name, default, default)
        for t in instance_types.all_types():
            default = 8.0 if t.accelerators else 20.0
            name = cluster_usage_name(t.name)
            code = _code(name)
            self.items[("sagemaker", code)] = Quota("sagemaker", code, name, default, default)

    def by_name(self, service: str, name: str) -> Quota | None:
        """Find a quota by its name."""
        return next((q for q in self.items.values() if q.service == service and q.name == name), None)

    def value(self, service: str, name: str) -> float:
        """Current value of a named quota (infinite if the twin does not model it)."""
        q = self.by_name(service, name)
        return q.value if q else float("inf")

    def set(self, spec: dict[str, Any]) -> Quota:
        """`/_twin/quotas`: {service_code, quota_code | quota_name | instance_type, value}."""
        service = str(spec.get("service_code", "sagemaker"))
        q: Quota | None = None
        if spec.get("quota_code"):
            q = self.items.get((service, str(spec["quota_code"])))
        elif spec.get("quota_name"):
            q = self.by_name(service, str(spec["quota_name"]))
        elif spec.get("instance_type"):
            q = self.by_name("sagemaker", cluster_usage_name(str(spec["instance_type"])))
        if q is None:
            raise ValueError("unknown quota")
        if not isinstance(spec.get("value"), (int, float)):
            raise ValueError("value must be a number")
        q.value = float(spec["value"])
        return q

    def get(self, service: str, code: str) -> Quota:
        """A quota by code, or NoSuchResourceException."""
        if service not in SERVICE_NAMES:
            raise AwsError("NoSuchResourceException", f"The service {service} does not exist.")
        q = self.items.get((service, code))
        if q is None:
            raise AwsError("NoSuchResourceException", f"The quota {code} does not exist for {service}.")
        return q


def register(ctx: AwsContext, quotas: Quotas) -> None:
    """Answer the Service Quotas API from `quotas`."""
    svc = "service-quotas"

    def paged(req: AwsRequest, items: list[dict[str, Any]], key: str) -> RawResponse:
        return json_response(req, page(req.params, items, key))

    def listed(req: AwsRequest, *, default: bool) -> RawResponse:
        service = str(req.params.get("ServiceCode", ""))
        if service not in SERVICE_NAMES:
            raise AwsError("NoSuchResourceException", f"The service {service} does not exist.")
        code = req.params.get("QuotaCode")
        items = [
            q.shape(ctx.account_id, req.region, default=default)
            for q in sorted(quotas.items.values(), key=lambda q: q.name)
            if q.service == service and (code is None or q.code == code)
        ]
        return paged(req, items, "Quotas")

    @ctx.route(svc, "ListServices")
    def list_services(req: AwsRequest) -> RawResponse:
        items = [{"ServiceCode": k, "ServiceName": v} for k, v in sorted(SERVICE_NAMES.items())]
        return paged(req, items, "Services")

    @ctx.route(svc, "GetServiceQuota")
    def get_quota(req: AwsRequest) -> RawResponse:
        q = quotas.get(str(req.params.get("ServiceCode")), str(req.params.get("QuotaCode")))
        return json_response(req, {"Quota": q.shape(ctx.account_id, req.region)})

    @ctx.route(svc, "GetAWSDefaultServiceQuota")
    def get_default(req: AwsRequest) -> RawResponse:
        q = quotas.get(str(req.params.get("ServiceCode")), str(req.params.get("QuotaCode")))
        return json_response(req, {"Quota": q.shape(ctx.account_id, req.region, default=True)})

    @ctx.route(svc, "ListServiceQuotas")
    def list_quotas(req: AwsRequest) -> RawResponse:
        return listed(req, default=False)

    @ctx.route(svc, "ListAWSDefaultServiceQuotas")
    def list_defaults(req: AwsRequest) -> RawResponse:
        return listed(req, default=True)

    @ctx.route(svc, "RequestServiceQuotaIncrease")
    def request_increase(req: AwsRequest) -> RawResponse:
        q = quotas.get(str(req.params.get("ServiceCode")), str(req.params.get("QuotaCode")))
        desired = float(req.params.get("DesiredValue", 0))
        if desired <= q.value:
            raise AwsError("IllegalArgumentException", "The desired value must be greater than the current value.")
        rid = uuid.uuid4().hex
        record = {
            "Id": rid,
            "ServiceCode": q.service,
            "ServiceName": SERVICE_NAMES[q.service],
            "QuotaCode": q.code,
            "QuotaName": q.name,
            "DesiredValue": desired,
            "Status": "PENDING",
            "Created": ctx.clock.wall(),
            "LastUpdated": ctx.clock.wall(),
            "Requester": ctx.caller_arn,
            "QuotaArn": q.shape(ctx.account_id, req.region)["QuotaArn"],
            "GlobalQuota": False,
            "Unit": "None",
        }
        quotas.requests[rid] = record

        def approve() -> None:
            if quotas.requests.get(rid) is record:
                record["Status"] = "APPROVED"
                record["LastUpdated"] = ctx.clock.wall()
                q.value = max(q.value, desired)

        # Quota increases take a while in AWS; the twin approves after one twin hour.
        ctx.later(3600, approve)
        return json_response(req, {"RequestedQuota": record})

    @ctx.route(svc, "GetRequestedServiceQuotaChange")
    def get_request(req: AwsRequest) -> RawResponse:
        record = quotas.requests.get(str(req.params.get("RequestId")))
        if record is None:
            raise AwsError("NoSuchResourceException", "The request does not exist.")
        return json_response(req, {"RequestedQuota": record})

    @ctx.route(svc, "ListRequestedServiceQuotaChangeHistory")
    def history(req: AwsRequest) -> RawResponse:
        service = req.params.get("ServiceCode")
        items = [r for r in quotas.requests.values() if service in (None, r["ServiceCode"])]
        return paged(req, items, "RequestedQuotas")

    def vpc_guard(quota_name: str, count: Any, service: str = "vpc", error: str = "ResourceLimitExceeded") -> Any:
        def guard(req: AwsRequest) -> None:
            limit = quotas.value(service, quota_name)
            if count(req) >= limit:
                raise AwsError(error, f"The maximum number of {quota_name} has been reached ({int(limit)}).")

        return guard

    ctx.guards[("ec2", "CreateVpc")] = vpc_guard(
        "VPCs per Region", lambda r: len(ctx.ec2(r.region).vpcs), error="VpcLimitExceeded"
    )
    ctx.guards[("ec2", "CreateInternetGateway")] = vpc_guard(
        "Internet gateways per Region",
        lambda r: len(ctx.ec2(r.region).internet_gateways),
        error="InternetGatewayLimitExceeded",
    )
    ctx.guards[("ec2", "AllocateAddress")] = vpc_guard(
        "EC2-VPC Elastic IPs", lambda r: len(ctx.ec2(r.region).addresses), "ec2", "AddressLimitExceeded"
    )
    ctx.on_reset(quotas.reset)
