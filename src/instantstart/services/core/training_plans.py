"""Training plans pin capacity to an AZ: the one reconciliation of a requested AZ with a plan's zones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from instantstart.aws.hyperpod import HyperPod
from instantstart.context import AppContext
from instantstart.errors import InvalidInput
from instantstart.operations.waiting import blocking


def _field_error(field: str, message: str, hint: str | None = None) -> InvalidInput:
    return InvalidInput(
        f"Invalid input: {field}: {message}", hint=hint, details={"fields": [{"field": field, "message": message}]}
    )


def plan_zones(sm: HyperPod, arn: str) -> tuple[list[str], dict[str, Any]]:
    """The AZs of a training plan's reserved capacity, and the plan (blocking)."""
    plan = sm.describe_training_plan(arn)
    zones = sorted(
        {str(r["AvailabilityZone"]) for r in plan.get("ReservedCapacitySummaries", []) if r.get("AvailabilityZone")}
    )
    return zones, plan


@dataclass(frozen=True)
class PlanPlacement:
    """What a request asks for, with the names of its fields (they differ between tools)."""

    plan_arn: str | None
    availability_zone: str
    instance_type: str
    strict: bool = False
    subnet_given: bool = False
    az_field: str = "availabilityZone"
    type_field: str = "instanceType"


async def reconcile_plan_zone(app: AppContext, region: str, want: PlanPlacement) -> tuple[str, list[str]]:
    """The AZ a group goes to and the notes explaining it, decided before any AWS write.

    Without a plan: the requested AZ. With one: the plan must reserve the instance type; a requested AZ
    outside the plan's zones is replaced by the plan's first zone (a note says so), unless `strict` or an
    explicit subnet insists on it, which is refused naming both AZs.
    """
    if not want.plan_arn:
        return want.availability_zone, []
    zones, plan = await blocking(plan_zones, HyperPod(app.aws, region), want.plan_arn)
    types = {r.get("InstanceType") for r in plan.get("ReservedCapacitySummaries", [])}
    if types and want.instance_type not in types:
        raise _field_error(
            want.type_field,
            f"the training plan reserves {', '.join(sorted(map(str, types)))}, not {want.instance_type}",
        )
    notes = []
    if plan.get("Status") not in ("Active", None):
        notes.append(f"The training plan is {plan.get('Status')}; its nodes launch once it is Active.")
    if not zones or want.availability_zone in zones:
        return want.availability_zone, notes
    if want.strict or want.subnet_given:
        why = "the given subnet is in" if want.subnet_given else "strictAvailabilityZone asks for"
        raise _field_error(
            want.az_field,
            f"the training plan's capacity is in {', '.join(zones)}, but {why} {want.availability_zone}",
            hint=f"Use {want.az_field} {zones[0]} (and a subnet there), or another training plan.",
        )
    note = (
        f"The training plan's capacity is in {zones[0]}; the group is placed in {zones[0]} "
        f"instead of the requested {want.availability_zone}."
    )
    return zones[0], [*notes, note]
