"""What the capacity tools share about HyperPod instance groups: lookups, capacity events, waiting for a count."""

from __future__ import annotations

from typing import Any

from instantstart.aws.hyperpod import HyperPod
from instantstart.context import AppContext, StageContext
from instantstart.errors import CapacityUnavailable, InvalidInput, PreconditionFailed, ProviderError
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_reads import CAPACITY_WORDS
from instantstart.services.base.registry import hyperpod_cluster_name
from instantstart.store.models import ClusterRow

GROUP_TIMEOUT = 3 * 3600
GROUP_NAME = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"


def field_error(field: str, message: str, hint: str | None = None) -> InvalidInput:
    """InvalidInput naming one field."""
    return InvalidInput(
        f"Invalid input: {field}: {message}", hint=hint, details={"fields": [{"field": field, "message": message}]}
    )


def capacity_type(group: dict[str, Any]) -> str:
    """OnDemand, Spot or TrainingPlan, from a described (or requested) group."""
    if group.get("TrainingPlanArn"):
        return "TrainingPlan"
    return "Spot" if "Spot" in (group.get("CapacityRequirements") or {}) else "OnDemand"


def find_group(cluster: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The described group named `name`."""
    return next((g for g in cluster.get("InstanceGroups", []) if g.get("InstanceGroupName") == name), None)


def placement(found: dict[str, Any], cluster: dict[str, Any]) -> list[str]:
    """The subnets a described group runs in (its override, else the cluster's)."""
    override = (found.get("OverrideVpcConfig") or {}).get("Subnets")
    return list(override or (cluster.get("VpcConfig") or {}).get("Subnets") or [])


def karpenter_groups(row: ClusterRow) -> list[str]:
    """Instance groups HyperPod-managed Karpenter manages on this cluster (as recorded by karpenter_install)."""
    state = facts_of(row).karpenter
    return list(state.get("instanceGroups") or []) if state.get("enabled") else []


async def described(app: AppContext, row: ClusterRow) -> dict[str, Any]:
    """DescribeCluster of the row's HyperPod cluster; PreconditionFailed when there is none."""
    name = hyperpod_cluster_name(row)
    cluster = await blocking(HyperPod(app.aws, row.region).describe_cluster, name)
    if cluster is None:
        raise PreconditionFailed(
            f"Cluster {row.tag} has no HyperPod cluster {name}.",
            hint="Create it first (hyperpod_create or cluster_create).",
        )
    return cluster


def group_events(sm: HyperPod, cluster: str, group: str) -> list[dict[str, Any]]:
    """Error events of one group that report a capacity shortage (blocking)."""
    return [
        e
        for e in sm.list_events(cluster, group)
        if e.get("EventLevel") == "Error" and any(w in (e.get("Description") or "").lower() for w in CAPACITY_WORDS)
    ]


async def seen_events(sm: HyperPod, cluster: str, group: str) -> set[Any]:
    """Ids of the group's capacity events so far (taken before a change, so only new ones count)."""
    return {e.get("EventId") for e in await blocking(group_events, sm, cluster, group)}


async def wait_group(
    stage: StageContext, sm: HyperPod, cluster: str, group: str, want: int | None, seen: set[Any]
) -> dict[str, Any]:
    """Until the group is InService with CurrentCount at its target (or `want`); a capacity event not in
    `seen` fails the stage with CAPACITY_UNAVAILABLE."""

    async def settled() -> tuple[bool, str]:
        details = await blocking(sm.describe_cluster, cluster)
        found = find_group(details or {}, group)
        if found is None:
            raise ProviderError(f"Instance group {group} disappeared from {cluster}.", retryable=False)
        fresh = [e for e in await blocking(group_events, sm, cluster, group) if e.get("EventId") not in seen]
        if fresh:
            raise CapacityUnavailable(
                f"HyperPod could not get capacity for {group}: {fresh[0].get('Description')}",
                hint="HyperPod keeps retrying in continuous mode; wait and operation_retry, or use another "
                "AZ, instance type, Spot or a training plan.",
            )
        if (details or {}).get("ClusterStatus") == "RollingBack":
            raise ProviderError(
                f"HyperPod is rolling {group} back to its previous count: "
                f"{(details or {}).get('FailureMessage') or 'its new instances could not be provisioned'}",
                hint="Read cluster_events for the failed instances, fix the cause, then operation_retry once the "
                "cluster is InService again.",
                retryable=True,
            )
        if found.get("Status") == "Failed":
            raise ProviderError(
                f"Instance group {group} failed: {(details or {}).get('FailureMessage', '')}", retryable=False
            )
        target = int(found.get("TargetCount", 0)) if want is None else want
        current = int(found.get("CurrentCount", 0))
        done = found.get("Status") == "InService" and current == target and int(found.get("TargetCount", 0)) == target
        return done, f"{group}: {found.get('Status')} {current}/{target}"

    await wait_until(stage, settled, limit_seconds=GROUP_TIMEOUT, what=f"instance group {group}")
    latest = await blocking(sm.describe_cluster, cluster)
    return find_group(latest or {}, group) or {}
