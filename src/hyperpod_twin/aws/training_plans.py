"""SageMaker training plans: offerings searched per AZ, plans whose reserved capacity lives in one AZ."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

from . import instance_types
from .context import AwsContext
from .protocol import AwsError, AwsRequest, RawResponse, json_response, page, validation

# Rough on-demand-equivalent hourly prices (USD) used to compute an UpfrontFee string.
_HOURLY = {
    "ml.p4d.24xlarge": 11.57,
    "ml.p4de.24xlarge": 14.32,
    "ml.p5.48xlarge": 31.46,
    "ml.p5.4xlarge": 4.33,
    "ml.p5e.48xlarge": 34.61,
    "ml.p5en.48xlarge": 36.18,
    "ml.p6-b200.48xlarge": 44.13,
    "ml.p6-b300.48xlarge": 61.20,
    "ml.trn1.32xlarge": 11.18,
    "ml.trn2.48xlarge": 27.60,
}
ACTIVATION_DELAY = 60.0  # twin seconds from purchase to Active when the plan starts at once


@dataclass
class Plan:
    """A purchased training plan."""

    name: str
    arn: str
    region: str
    instance_type: str
    count: int
    availability_zone: str
    availability_zone_id: str
    start: float
    end: float
    duration_hours: int
    fee: str
    target_resources: list[str]
    status: str = "Pending"
    tags: list[dict[str, str]] = field(default_factory=list)

    def reserved_capacity_arn(self, account_id: str) -> str:
        """The single reserved capacity of this plan."""
        rid = hashlib.sha1(self.arn.encode()).hexdigest()[:12]  # noqa: S324 - an id, not security
        return f"arn:aws:sagemaker:{self.region}:{account_id}:reserved-capacity/{rid}"


class TrainingPlans:
    """Offerings and plans; `in_use` is supplied by the HyperPod side (instances reserved by groups)."""

    def __init__(self, ctx: AwsContext) -> None:
        self.ctx = ctx
        self.offerings: dict[str, dict[str, Any]] = {}
        self.plans: dict[str, Plan] = {}  # by ARN
        self.in_use: Any = lambda arn, exclude=None: 0

    def reset(self) -> None:
        """Forget every offering and plan."""
        self.offerings.clear()
        self.plans.clear()

    def find(self, name_or_arn: str) -> Plan | None:
        """A plan by name or ARN."""
        if name_or_arn in self.plans:
            return self.plans[name_or_arn]
        return next((p for p in self.plans.values() if p.name == name_or_arn), None)

    def shape(self, plan: Plan) -> dict[str, Any]:
        """DescribeTrainingPlan response."""
        used = int(self.in_use(plan.arn))
        return {
            "TrainingPlanArn": plan.arn,
            "TrainingPlanName": plan.name,
            "Status": plan.status,
            "StatusMessage": _status_message(plan.status),
            "DurationHours": plan.duration_hours,
            "DurationMinutes": 0,
            "StartTime": plan.start,
            "EndTime": plan.end,
            "UpfrontFee": plan.fee,
            "CurrencyCode": "USD",
            "TotalInstanceCount": plan.count,
            "AvailableInstanceCount": max(plan.count - used, 0),
            "InUseInstanceCount": used,
            "UnhealthyInstanceCount": 0,
            "TargetResources": list(plan.target_resources),
            "ReservedCapacitySummaries": [
                {
                    "ReservedCapacityArn": plan.reserved_capacity_arn(self.ctx.account_id),
                    "ReservedCapacityType": "Instance",
                    "InstanceType": plan.instance_type,
                    "TotalInstanceCount": plan.count,
                    "Status": plan.status,
                    "AvailabilityZone": plan.availability_zone,
                    "AvailabilityZoneId": plan.availability_zone_id,
                    "DurationHours": plan.duration_hours,
                    "DurationMinutes": 0,
                    "StartTime": plan.start,
                    "EndTime": plan.end,
                }
            ],
        }

    def check_group(
        self,
        *,
        plan_arn: str,
        group_name: str,
        instance_type: str | None,
        zones: list[tuple[str, str, str]],
        count: int,
        exclude: tuple[str, str] | None,
    ) -> Plan:
        """Refuse a group whose plan is unusable, of another type, in another AZ, or too small."""
        plan = self.plans.get(plan_arn)
        if plan is None:
            raise validation(f"Training plan {plan_arn} does not exist.")
        if plan.status in ("Expired", "Failed"):
            raise validation(f"Training plan {plan.name} is {plan.status} and cannot be used.")
        if "hyperpod-cluster" not in plan.target_resources:
            raise validation(f"Training plan {plan.name} does not target hyperpod-cluster.")
        if instance_type != plan.instance_type:
            raise validation(
                f"Instance group {group_name} uses instance type {instance_type}, but training plan "
                f"{plan.name} reserves {plan.instance_type}."
            )
        wrong = [(s, az, az_id) for s, az, az_id in zones if az != plan.availability_zone]
        if wrong:
            subnets = ", ".join(s for s, _, _ in wrong)
            where = ", ".join(sorted({f"{az} ({az_id})" for _, az, az_id in wrong}))
            raise validation(
                f"The subnet(s) [{subnets}] of instance group {group_name} are in {where}, but training plan "
                f"{plan.name} reserves capacity in {plan.availability_zone} ({plan.availability_zone_id}). "
                "Use a subnet in the training plan's Availability Zone."
            )
        available = plan.count - int(self.in_use(plan.arn, exclude))
        if count > available:
            raise validation(
                f"Instance group {group_name} requests {count} instances, but training plan {plan.name} has "
                f"{available} available."
            )
        return plan


def _status_message(status: str) -> str:
    return {
        "Pending": "Payment is being processed",
        "Scheduled": "The plan starts at its StartTime",
        "Active": "Reserved capacity is available",
        "Expired": "The plan has ended",
    }.get(status, status)


class TrainingPlanOps:
    """The SageMaker training plan operations, one named handler each."""

    def __init__(self, ctx: AwsContext, plans: TrainingPlans) -> None:
        self.ctx = ctx
        self.plans = plans

    def search(self, req: AwsRequest) -> RawResponse:
        """SearchTrainingPlanOfferings."""
        p = req.params
        itype = p.get("InstanceType")
        if itype is None:
            raise validation("InstanceType or UltraServerType is required.")
        if itype not in instance_types.RESERVABLE:
            raise validation(
                f"1 validation error detected: Value '{itype}' at 'instanceType' failed to satisfy constraint: "
                f"Member must satisfy enum value set: [{', '.join(instance_types.RESERVABLE)}]"
            )
        count = int(p.get("InstanceCount") or 1)
        targets = list(p.get("TargetResources") or [])
        if not targets:
            raise validation("TargetResources is required.")
        hours = int(p.get("DurationHours") or 24)
        now = self.ctx.clock.wall()
        start = max(float(p.get("StartTimeAfter") or now), now)
        end = start + hours * 3600
        if p.get("EndTimeBefore") is not None and end > float(p["EndTimeBefore"]):
            return json_response(req, {"TrainingPlanOfferings": [], "TrainingPlanExtensionOfferings": []})
        offerings = []
        with self.ctx.locked():
            for az in self.ctx.az_names(req.region)[:3]:
                az_id = self.ctx.az_id(req.region, az)
                if self.ctx.faults.capacity_scripted_short(itype, az, az_id):
                    continue  # no capacity to reserve in an AZ scripted as short
                oid = "tpo-" + hashlib.sha1(f"{itype}{count}{az}{start}{hours}".encode()).hexdigest()[:20]  # noqa: S324
                fee = f"{_HOURLY.get(itype, 10.0) * count * hours:.2f}"
                offering = {
                    "TrainingPlanOfferingId": oid,
                    "TargetResources": targets,
                    "RequestedStartTimeAfter": start,
                    "DurationHours": hours,
                    "DurationMinutes": 0,
                    "UpfrontFee": fee,
                    "CurrencyCode": "USD",
                    "ReservedCapacityOfferings": [
                        {
                            "ReservedCapacityType": "Instance",
                            "InstanceType": itype,
                            "InstanceCount": count,
                            "AvailabilityZone": az,
                            "DurationHours": hours,
                            "DurationMinutes": 0,
                            "StartTime": start,
                            "EndTime": end,
                        }
                    ],
                }
                self.plans.offerings[oid] = {**offering, "_az_id": az_id, "_region": req.region}
                offerings.append(offering)
        return json_response(req, {"TrainingPlanOfferings": offerings, "TrainingPlanExtensionOfferings": []})

    def create(self, req: AwsRequest) -> RawResponse:
        """CreateTrainingPlan."""
        p = req.params
        name = str(p.get("TrainingPlanName") or "")
        if not name or len(name) > 64:
            raise validation("TrainingPlanName must be 1 to 64 characters.")
        with self.ctx.locked():
            offering = self.plans.offerings.get(str(p.get("TrainingPlanOfferingId")))
            if offering is None:
                raise AwsError(
                    "ResourceNotFound", f"Training plan offering {p.get('TrainingPlanOfferingId')} not found."
                )
            arn = self.ctx.arn("sagemaker", req.region, f"training-plan/{name}")
            if arn in self.plans.plans:
                raise AwsError("ResourceInUse", f"Training plan {name} already exists.")
            rc = offering["ReservedCapacityOfferings"][0]
            plan = Plan(
                name=name,
                arn=arn,
                region=req.region,
                instance_type=rc["InstanceType"],
                count=int(rc["InstanceCount"]),
                availability_zone=rc["AvailabilityZone"],
                availability_zone_id=offering["_az_id"],
                start=float(rc["StartTime"]),
                end=float(rc["EndTime"]),
                duration_hours=int(rc["DurationHours"]),
                fee=offering["UpfrontFee"],
                target_resources=list(offering["TargetResources"]),
                tags=list(p.get("Tags") or []),
            )
            self.plans.plans[arn] = plan
            _schedule(self.ctx, self.plans, plan)
        return json_response(req, {"TrainingPlanArn": arn})

    def describe(self, req: AwsRequest) -> RawResponse:
        """DescribeTrainingPlan."""
        with self.ctx.locked():
            plan = self.plans.find(str(req.params.get("TrainingPlanName")))
            if plan is None:
                raise AwsError("ResourceNotFound", f"Training plan {req.params.get('TrainingPlanName')} not found.")
            return json_response(req, self.plans.shape(plan))

    def list_plans(self, req: AwsRequest) -> RawResponse:
        """ListTrainingPlans."""
        p = req.params
        with self.ctx.locked():
            items = [self.plans.shape(x) for x in self.plans.plans.values() if x.region == req.region]
        for f in p.get("Filters") or []:
            if f.get("Name") == "Status":
                items = [i for i in items if i["Status"] == f.get("Value")]
        if p.get("StartTimeAfter") is not None:
            items = [i for i in items if i["StartTime"] > float(p["StartTimeAfter"])]
        if p.get("StartTimeBefore") is not None:
            items = [i for i in items if i["StartTime"] < float(p["StartTimeBefore"])]
        key = {"TrainingPlanName": "TrainingPlanName", "Status": "Status"}.get(str(p.get("SortBy")), "StartTime")
        items.sort(key=lambda i: i[key], reverse=p.get("SortOrder") == "Descending")
        for item in items:
            item.pop("UnhealthyInstanceCount", None)
        return json_response(req, page(p, copy.deepcopy(items), "TrainingPlanSummaries"))


def register(ctx: AwsContext, plans: TrainingPlans) -> None:
    """Answer the training plan API from `plans`."""
    sm = "sagemaker"
    ops = TrainingPlanOps(ctx, plans)
    for operation, handler in (
        ("SearchTrainingPlanOfferings", ops.search),
        ("CreateTrainingPlan", ops.create),
        ("DescribeTrainingPlan", ops.describe),
        ("ListTrainingPlans", ops.list_plans),
    ):
        ctx.route(sm, operation)(handler)
    ctx.on_reset(plans.reset)


def _schedule(ctx: AwsContext, plans: TrainingPlans, plan: Plan) -> None:
    now = ctx.clock.wall()

    def activate() -> None:
        if plans.plans.get(plan.arn) is plan and plan.status in ("Pending", "Scheduled"):
            plan.status = "Active"

    def scheduled() -> None:
        if plans.plans.get(plan.arn) is plan and plan.status == "Pending":
            plan.status = "Scheduled"

    def expire() -> None:
        if plans.plans.get(plan.arn) is plan:
            plan.status = "Expired"

    if plan.start - now > ACTIVATION_DELAY:
        ctx.later(ACTIVATION_DELAY, scheduled)
    ctx.later(max(plan.start - now, ACTIVATION_DELAY), activate)
    ctx.later(plan.end - now, expire)
