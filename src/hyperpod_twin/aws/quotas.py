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


class QuotaOps:
    """The Service Quotas operations, one named handler each."""

    def __init__(self, ctx: AwsContext, quotas: Quotas) -> None:
        self.ctx = ctx
        self.quotas = quotas

    def _paged(self, req: AwsRequest, items: list[dict[str, Any]], key: str) -> RawResponse:
        return json_response(req, page(req.params, items, key))

    def _listed(self, req: AwsRequest, *, default: bool) -> RawResponse:
        service = str(req.params.get("ServiceCode", ""))
        if service not in SERVICE_NAMES:
            raise AwsError("NoSuchResourceException", f"The service {service} does not exist.")
        code = req.params.get("QuotaCode")
        items = [
            q.shape(self.ctx.account_id, req.region, default=default)
            for q in sorted(self.quotas.items.values(), key=lambda q: q.name)
            if q.service == service and (code is None or q.code == code)
        ]
        return self._paged(req, items, "Quotas")

    def list_services(self, req: AwsRequest) -> RawResponse:
        """ListServices."""
        items = [{"ServiceCode": k, "ServiceName": v} for k, v in sorted(SERVICE_NAMES.items())]
        return self._paged(req, items, "Services")

    def get_quota(self, req: AwsRequest) -> RawResponse:
        """GetServiceQuota."""
        q = self.quotas.get(str(req.params.get("ServiceCode")), str(req.params.get("QuotaCode")))
        return json_response(req, {"Quota": q.shape(self.ctx.account_id, req.region)})

    def get_default(self, req: AwsRequest) -> RawResponse:
        """GetAWSDefaultServiceQuota."""
        q = self.quotas.get(str(req.params.get("ServiceCode")), str(req.params.get("QuotaCode")))
        return json_response(req, {"Quota": q.shape(self.ctx.account_id, req.region, default=True)})

    def list_quotas(self, req: AwsRequest) -> RawResponse:
        """ListServiceQuotas."""
        return self._listed(req, default=False)

    def list_defaults(self, req: AwsRequest) -> RawResponse:
        """ListAWSDefaultServiceQuotas."""
        return self._listed(req, default=True)

    def request_increase(self, req: AwsRequest) -> RawResponse:
        """RequestServiceQuotaIncrease."""
        q = self.quotas.get(str(req.params.get("ServiceCode")), str(req.params.get("QuotaCode")))
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
            "Created": self.ctx.clock.wall(),
            "LastUpdated": self.ctx.clock.wall(),
            "Requester": self.ctx.caller_arn,
            "QuotaArn": q.shape(self.ctx.account_id, req.region)["QuotaArn"],
            "GlobalQuota": False,
            "Unit": "None",
        }
        self.quotas.requests[rid] = record

        def approve() -> None:
            if self.quotas.requests.get(rid) is record:
                record["Status"] = "APPROVED"
                record["LastUpdated"] = self.ctx.clock.wall()
                q.value = max(q.value, desired)

        # Quota increases take a while in AWS; the twin approves after one twin hour.
        self.ctx.later(3600, approve)
        return json_response(req, {"RequestedQuota": record})

    def get_request(self, req: AwsRequest) -> RawResponse:
        """GetRequestedServiceQuotaChange."""
        record = self.quotas.requests.get(str(req.params.get("RequestId")))
        if record is None:
            raise AwsError("NoSuchResourceException", "The request does not exist.")
        return json_response(req, {"RequestedQuota": record})

    def history(self, req: AwsRequest) -> RawResponse:
        """ListRequestedServiceQuotaChangeHistory."""
        service = req.params.get("ServiceCode")
        items = [r for r in self.quotas.requests.values() if service in (None, r["ServiceCode"])]
        return self._paged(req, items, "RequestedQuotas")

    def vpc_guard(
        self, quota_name: str, count: Any, service: str = "vpc", error: str = "ResourceLimitExceeded"
    ) -> Any:
        """A guard refusing a create call once `count` reaches the quota `quota_name` of `service`."""
        def guard(req: AwsRequest) -> None:
            limit = self.quotas.value(service, quota_name)
            if count(req) >= limit:
                raise AwsError(error, f"The maximum number of {quota_name} has been reached ({int(limit)}).")

        return guard


def register(ctx: AwsContext, quotas: Quotas) -> None:
    """Answer the Service Quotas API from `quotas`."""
    svc = "service-quotas"
    ops = QuotaOps(ctx, quotas)
    for operation, handler in (
        ("ListServices", ops.list_services),
        ("GetServiceQuota", ops.get_quota),
        ("GetAWSDefaultServiceQuota", ops.get_default),
        ("ListServiceQuotas", ops.list_quotas),
        ("ListAWSDefaultServiceQuotas", ops.list_defaults),
        ("RequestServiceQuotaIncrease", ops.request_increase),
        ("GetRequestedServiceQuotaChange", ops.get_request),
        ("ListRequestedServiceQuotaChangeHistory", ops.history),
    ):
        ctx.route(svc, operation)(handler)
    ctx.guards[("ec2", "CreateVpc")] = ops.vpc_guard(
        "VPCs per Region", lambda r: len(ctx.ec2(r.region).vpcs), error="VpcLimitExceeded"
    )
    ctx.guards[("ec2", "CreateInternetGateway")] = ops.vpc_guard(
        "Internet gateways per Region",
        lambda r: len(ctx.ec2(r.region).internet_gateways),
        error="InternetGatewayLimitExceeded",
    )
    ctx.guards[("ec2", "AllocateAddress")] = ops.vpc_guard(
        "EC2-VPC Elastic IPs", lambda r: len(ctx.ec2(r.region).addresses), "ec2", "AddressLimitExceeded"
    )
    ctx.on_reset(quotas.reset)
