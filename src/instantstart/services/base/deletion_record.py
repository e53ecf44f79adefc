"""What a cluster deletion has removed so far, written on the cluster row at each deletion step.

A deletion that is cancelled or fails part-way (after DeleteCluster of the EKS cluster, say) leaves the cluster
registered, so `cluster_delete` can be retried. Its record must then say what is gone at once: the stage view
(`stages.eks`, `stages.hyperpod`) turns DELETING when the delete call is made and DELETED once AWS confirms it,
and the `deletion` fact (ClusterFacts.deletion) lists the main resources removed (EKS cluster, HyperPod cluster,
network) with the operation and how to finish. The creation pipeline's stage mirror
(registry.mirror_pipeline_stages) does not cover deletion, so these two stage values are written here."""

from __future__ import annotations

from typing import Any

from instantstart.context import AppContext
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of, stored_changes
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, utcnow

# Ledger resource type → the cluster stage it made (its status turns DELETING, then DELETED) and what it is called.
STAGE_OF = {"eks:cluster": "eks", "sagemaker:cluster": "hyperpod"}
RECORDED = {"eks:cluster": "EKS cluster", "sagemaker:cluster": "HyperPod cluster", "ec2:vpc": "network (VPC)"}
DELETING, DELETED = "DELETING", "DELETED"


def record_step(
    db: Database, tag: str, resource_type: str, resource_id: str, operation_id: str, state: str | None
) -> None:
    """Record that deletion of one main resource started (DELETING) or ended (DELETED); `state` None undoes a
    DELETING whose delete call failed (the resource is still there: the stage gets back its earlier status)."""
    if resource_type not in RECORDED:
        return
    with db.session() as session:
        row = session.get(ClusterRow, tag)
        if row is None:
            return
        record = dict(facts_of(row).deletion or {})
        resources = dict(record.get("resources") or {})
        before = dict(record.get("stagesBefore") or {})
        key = f"{resource_type} {resource_id}"
        stage = STAGE_OF.get(resource_type)
        stages = dict(row.stages or {})
        if state is None:
            resources.pop(key, None)
            if stage is not None and stage in before:
                stages[stage] = before.pop(stage)
        else:
            resources[key] = state
            if stage is not None:
                current = stages.get(stage)
                if current not in (DELETING, DELETED) and current is not None:
                    before[stage] = current
                stages[stage] = state
        record.update(operationId=operation_id, resources=resources, stagesBefore=before)
        row.details = {**(row.details or {}), **stored_changes({"deletion": record if resources else None})}
        row.stages = stages
        row.updated_at = utcnow()


async def note_step(app: AppContext, step: tuple[str, str, str, str], state: str | None) -> None:
    """`record_step` for (clusterTag, resource type, resource id, operation id), seen by the next status read."""
    if step[1] in RECORDED:
        await blocking(record_step, app.db, *step, state)
        app.db_reads.invalidate(f"row:{step[0]}")


def deletion_problems(row: ClusterRow) -> list[str]:
    """What a deletion that has not finished removed (or is removing), and how to finish it: for status."""
    record: dict[str, Any] = facts_of(row).deletion or {}
    stages = row.stages or {}
    lines = []
    for key, state in sorted((record.get("resources") or {}).items()):
        resource_type, _, resource_id = key.partition(" ")
        stage = STAGE_OF.get(resource_type)
        if stage is not None and stages.get(stage) not in (DELETING, DELETED):
            continue  # created again since
        verb = "was deleted" if state == DELETED else "is being deleted"
        lines.append(f"{RECORDED.get(resource_type, resource_type)} {resource_id} {verb}")
    if not lines:
        return []
    op = record.get("operationId")
    return [
        f"cluster_delete (operation {op}) has begun deleting this cluster: {'; '.join(lines)}. If that operation"
        f" ended FAILED or CANCELLED, finish the deletion with operation_retry {op}, or call cluster_delete_plan"
        " and cluster_delete again (what is gone already counts as done)."
    ]
