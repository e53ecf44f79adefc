"""The Karpenter toggle's autoscaling IAM role: created (and recorded in the ledger) on enable, deleted on disable."""

from __future__ import annotations

import contextlib
from typing import Any

from instantstart.aws import iam
from instantstart.context import AppContext, StageContext
from instantstart.errors import NotFound
from instantstart.manifests import iam_policies as pol
from instantstart.manifests import karpenter as karpenter_manifests
from instantstart.operations.waiting import blocking
from instantstart.services.base.hyperpod_groups import described
from instantstart.services.base.iam import ensure_role
from instantstart.services.base.registry import ClusterParams, get_cluster, record_facts
from instantstart.services.capacity.karpenter.state import record_state, state_of
from instantstart.services.core.ledger import mark_deleted, resources_of


async def stage_role(stage: StageContext) -> dict[str, Any]:
    """The autoscaling role HyperPod assumes (trust hyperpod.sagemaker.amazonaws.com; add/delete nodes)."""
    p = stage.params_as(ClusterParams)
    app = stage.app
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    cluster = await described(app, row)
    cluster_arn = str(cluster["ClusterArn"])
    account = cluster_arn.split(":")[4]
    name = karpenter_manifests.role_name(p.cluster_tag)
    # A retry after the role was made here still owns it.
    created = await blocking(iam.role_arn, app.aws, p.region, name) is None or bool(state_of(row).get("roleCreated"))
    arn = await blocking(
        ensure_role,
        app.aws,
        app.db,
        cluster_tag=p.cluster_tag,
        operation_id=stage.operation_id,
        region=p.region,
        name=name,
        trust=pol.autoscaling_trust(account, cluster_arn),
        managed=[],
        inline=pol.autoscaling_policy(p.region, cluster_arn),
        description="HyperPod-managed Karpenter adds and removes nodes",
    )
    await record_state(app, p.cluster_tag, enabled=False, roleName=name, roleArn=arn, roleCreated=created)
    return {"roleName": name, "roleArn": arn, "created": created}


def delete_role(app: AppContext, tag: str, region: str, name: str) -> None:
    """Delete the autoscaling role (policies first; gone already is fine) and mark its ledger row deleted."""
    with contextlib.suppress(NotFound):
        iam.delete_role(app.aws, region, name)
    for res in resources_of(app.db, tag):
        if res.resource_type == "iam:role" and res.resource_id == name:
            mark_deleted(app.db, res.id)


async def stage_remove_role(stage: StageContext) -> dict[str, Any]:
    """Delete the autoscaling role, if the toggle created it; then forget the toggle's state."""
    p = stage.params_as(ClusterParams)
    app = stage.app
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    state = state_of(row)
    out: dict[str, Any] = {"role": "left as found"}
    if state.get("roleCreated") and state.get("roleName"):
        await blocking(delete_role, app, p.cluster_tag, p.region, state["roleName"])
        out = {"role": f"deleted {state['roleName']}"}
    await blocking(record_facts, app.db, p.cluster_tag, karpenter={"enabled": False, "removed": True})
    return out
