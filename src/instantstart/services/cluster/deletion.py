"""Cluster deletion: a plan first (ordered, from the ledger plus a tag scan for orphans), then its execution."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.aws.errors import error_code, translate
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import Conflict, DependencyFailed
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.deletion_record import DELETED, DELETING, note_step
from instantstart.services.base.params import DeleteParams, PlannedStep, stored
from instantstart.services.base.registry import ACTIVE_CLUSTER_KEY, get_cluster, submit_for_cluster
from instantstart.services.cluster.deleters import delete_one, is_gone, still_there
from instantstart.services.cluster.deletion_scan import load_balancer_holders, tag_scan
from instantstart.services.core.ledger import mark_deleted, mark_deleting, resources_of
from instantstart.services.training.mlflow import config_key as mlflow_config_key
from instantstart.store.models import ClusterRow, ResourceRow, StateRow

log = logging.getLogger(__name__)

# Deletion order: what holds other things goes first (load balancers and Kubernetes-owned AWS resources,
# then HyperPod, then EKS and its attachments, then identity, then the network from the edges inwards).
ORDER = [
    "k8s:loadbalancer-service",
    "elbv2:load-balancer",
    "sagemaker:cluster",
    "sagemaker:mlflow-tracking-server",  # mlflow_configure's; its roles go with iam:role
    "fsx:file-system",  # after the nodes that mount it; its claims go first (fsx_delete.delete_for_cluster)
    "eks:pod-identity-association",
    "eks:addon",
    "grafana:workspace",  # the observability feature's, when InstantStart created it (adopted ones are not ledgered)
    "aps:workspace",
    "eks:cluster",
    "iam:oidc-provider",
    "iam:role",
    "ec2:nat-gateway",
    "ec2:elastic-ip",
    "ec2:vpc-endpoint",
    "ec2:route-table",
    "ec2:internet-gateway",
    "ec2:subnet",
    "ec2:security-group",
    "ec2:vpc",
    "s3:prefix",
    "s3:bucket",
]
WAIT_LIMIT = 3600.0


class DeletionPlanRequest(WireModel):
    """Which cluster to plan the deletion of."""

    cluster_tag: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
    delete_bucket: bool = Field(
        default=False,
        description="Also delete this cluster's prefixes of the project bucket (the bucket only when no other"
        " cluster uses it).",
    )
    include_foreign: bool = Field(
        default=False, description="Also delete resources tagged with the clusterTag by another installation."
    )


class PlannedResource(WireModel):
    """One resource the deletion will remove, in order."""

    order: int
    resource_type: str
    resource_id: str
    region: str
    source: str = Field(
        description="ledger (created by this control plane), tag (found by its tags and this installation's id)"
        " or foreign-tag (tagged with the clusterTag elsewhere)"
    )
    keep: bool = False
    details: dict[str, Any] = Field(default_factory=dict)


class DeletionPlan(WireModel):
    """The ordered deletion plan and the digest cluster_delete must be given to execute it."""

    cluster_tag: str
    imported: bool
    resources: list[PlannedResource]
    kept: list[PlannedResource]
    foreign: list[PlannedResource] = Field(
        default_factory=list,
        description="Tagged with the clusterTag but not by this installation: deleted only with includeForeign.",
    )
    plan_digest: str
    note: str


class DeleteRequest(WireModel):
    """Execute the deletion plan whose digest cluster_delete_plan returned."""

    cluster_tag: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
    plan_digest: str = Field(pattern=r"^[0-9a-f]{16}$", description="From cluster_delete_plan.")
    delete_bucket: bool = False
    include_foreign: bool = False


def _rank(resource_type: str) -> int:
    return ORDER.index(resource_type) if resource_type in ORDER else ORDER.index("iam:oidc-provider")


def build_plan(app: AppContext, tag: str, delete_bucket: bool, include_foreign: bool = False) -> DeletionPlan:
    """Blocking: the ordered plan. Imported clusters only lose what this control plane created."""
    row = get_cluster(app.db, tag)
    ledger: list[ResourceRow] = resources_of(app.db, tag)
    items: dict[tuple[str, str], PlannedResource] = {}
    foreign: dict[tuple[str, str], PlannedResource] = {}
    for res in ledger:
        keep = bool((res.details or {}).get("keep")) and not delete_bucket
        items[(res.resource_type, res.resource_id)] = PlannedResource(
            order=0,
            resource_type=res.resource_type,
            resource_id=res.resource_id,
            region=res.region,
            source="ledger",
            keep=keep,
            details=dict(res.details or {}),
        )
    if not row.imported:
        try:
            scanned = [(k, r, True) for k, r in load_balancer_holders(app, row)] + tag_scan(app, row)
            for kind, rid, ours in scanned:
                source = "tag" if ours else "foreign-tag"
                planned = PlannedResource(
                    order=0, resource_type=kind, resource_id=rid, region=row.region, source=source
                )
                if (kind, rid) not in items:
                    (items if ours or include_foreign else foreign)[(kind, rid)] = planned
        except Exception as exc:
            raise translate(exc, "scan for resources tagged with the cluster") from exc
    ordered = sorted(items.values(), key=lambda r: (_rank(r.resource_type), r.resource_id))
    delete = [r.model_copy(update={"order": i + 1}) for i, r in enumerate(x for x in ordered if not x.keep)]
    kept = [r for r in ordered if r.keep]
    digest_source = json.dumps([[r.resource_type, r.resource_id] for r in delete], sort_keys=True)
    digest = hashlib.sha256(f"{tag}|{delete_bucket}|{include_foreign}|{digest_source}".encode()).hexdigest()[:16]
    note = (
        "Imported cluster: only resources this control plane created are deleted."
        if row.imported
        else "Everything created for this cluster is deleted in this order."
    )
    if kept:
        note += " The project bucket is kept (pass deleteBucket to remove it)."
    if foreign:
        note += " Resources tagged with this clusterTag by something else are listed in foreign, not deleted"
        note += " (pass includeForeign to delete them too)."
    return DeletionPlan(
        cluster_tag=tag,
        imported=row.imported,
        resources=delete,
        kept=kept,
        foreign=sorted(foreign.values(), key=lambda r: (_rank(r.resource_type), r.resource_id)),
        plan_digest=digest,
        note=note,
    )


@operation(
    "cluster_delete_plan", method="GET", path="/clusters/{clusterTag}/deletion-plan", example={"clusterTag": "demo"}
)
async def cluster_delete_plan(ctx: CallContext, req: DeletionPlanRequest) -> DeletionPlan:
    """The ordered list of what cluster_delete would remove (load balancers and HyperPod first, then EKS,
    IAM, and the network from the edges inwards) and its planDigest. Changes nothing."""
    return await to_thread.run_sync(build_plan, ctx.app, req.cluster_tag, req.delete_bucket, req.include_foreign)


@operation(
    "cluster_delete",
    destructive=True,
    idempotent=True,
    method="POST",
    path="/clusters/{clusterTag}/delete",
    completion="operation_get",
    example={"clusterTag": "demo", "planDigest": "0000000000000000"},
)
async def cluster_delete(ctx: CallContext, req: DeleteRequest) -> OperationRef:
    """Delete a cluster by executing the plan from cluster_delete_plan: pass its planDigest (if what exists
    changed since, the call is refused with the new plan's digest). Deleting what is already gone is
    success; the project bucket is kept unless deleteBucket is true. Imported clusters keep what this
    control plane did not create."""
    current = await to_thread.run_sync(build_plan, ctx.app, req.cluster_tag, req.delete_bucket, req.include_foreign)
    replayed = await ctx.app.runner.replay(
        "cluster_delete", ctx.idempotency_key, status_tool="operation_get", poll_after_seconds=15
    )
    if replayed is not None:
        return replayed
    if current.plan_digest != req.plan_digest:
        raise Conflict(
            "The deletion plan changed since it was shown; review it again.",
            hint="Call cluster_delete_plan and pass its planDigest.",
            details={"planDigest": current.plan_digest},
        )
    params = stored(
        DeleteParams(
            cluster_tag=req.cluster_tag,
            delete_bucket=req.delete_bucket,
            plan=[PlannedStep.model_validate(r.model_dump(by_alias=True)) for r in current.resources],
        )
    )
    return await submit_for_cluster(
        ctx, "cluster_delete", req.cluster_tag, params, status_tool="operation_get", poll_after_seconds=15
    )


async def _started(app: AppContext, step: tuple[str, str, str, str], row_id: int | None, started: bool) -> None:
    """Record that a delete call is being made (or, `started` False, that it failed: the resource stays) on the
    cluster row (its stage view and deletion facts) and on the resource's ledger row."""
    await note_step(app, step, DELETING if started else None)
    if row_id is not None:
        await blocking(mark_deleting, app.db, row_id, step[3] if started else None)


async def stage_delete(stage: StageContext) -> dict[str, Any]:
    """Delete every planned resource in order, waiting for each that takes time; gone already is success."""
    app = stage.app
    p = stage.params_as(DeleteParams)
    tag = p.cluster_tag
    ledger = {(r.resource_type, r.resource_id): r.id for r in await blocking(resources_of, app.db, tag)}
    deleted = 0
    for planned in p.plan:
        res = {**planned.model_dump(mode="json", by_alias=True), "clusterTag": tag}
        label = f"{planned.resource_type} {planned.resource_id}"
        await stage.progress(f"deleting {label} ({planned.order}/{len(p.plan)})")
        # The record says DELETING before the call (a cancel lands after the call returns) and DELETED once gone.
        step = (tag, planned.resource_type, planned.resource_id, stage.operation_id)
        row_id = ledger.get((planned.resource_type, planned.resource_id))
        await _started(app, step, row_id, True)
        try:
            immediate = await blocking(delete_one, app, res)
        except Exception as exc:
            if not is_gone(exc):
                await _started(app, step, row_id, False)
                code = error_code(exc)
                if code in ("DependencyViolation", "ResourceInUse", "ResourceInUseException", "DeleteConflict"):
                    raise DependencyFailed(f"{label} is still in use ({code}); retrying.", retryable=True) from exc
                raise translate(exc, f"delete {label}") from exc
            immediate = True
        if not immediate:

            async def gone(r: dict[str, Any] = res, what: str = label) -> tuple[bool, str]:
                there = await blocking(still_there, app, r)
                return not there, f"waiting for {what} to go"

            await wait_until(stage, gone, limit_seconds=WAIT_LIMIT, what=f"deletion of {label}")
        await note_step(app, step, DELETED)
        if row_id is not None:
            await blocking(mark_deleted, app.db, row_id)
        deleted += 1
    return {"deleted": deleted}


def _forget(app: AppContext, tag: str) -> None:
    with app.db.session() as session:
        row = session.get(ClusterRow, tag)
        if row is not None:
            session.delete(row)
        active = session.get(StateRow, ACTIVE_CLUSTER_KEY)
        if active is not None and active.value == tag:
            session.delete(active)
        mlflow_config = session.get(StateRow, mlflow_config_key(tag))
        if mlflow_config is not None:
            session.delete(mlflow_config)


async def stage_forget(stage: StageContext) -> dict[str, Any]:
    """Remove the cluster from the registry (and from being active)."""
    tag = stage.params_as(DeleteParams).cluster_tag
    await blocking(_forget, stage.app, tag)
    stage.app.cache.invalidate()
    return {"forgotten": tag}


KINDS.register(
    OperationKind(
        name="cluster_delete",
        params=DeleteParams,
        stages=(
            StageSpec(
                "delete",
                stage_delete,
                max_attempts=8,
                timeout_seconds=WAIT_LIMIT * 2,
                backoff_seconds=5,
                backoff_max_seconds=60,
            ),
            StageSpec("forget", stage_forget),
        ),
    )
)
