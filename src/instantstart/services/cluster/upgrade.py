"""cluster_upgrade: the cluster to the next Kubernetes minor version, in three resumable stages.

control-plane (UpdateClusterVersion, waited on DescribeUpdate) → addons (each incompatible add-on UpdateAddon'd
to the version the plan names, one at a time) → hyperpod-software (UpdateClusterSoftware). Each stage looks before
it acts, so a rerun after a crash adopts what the interrupted attempt started instead of starting it again: the
version update carries a client token derived from the operation, an add-on already moved is kept, nodes already
on the latest image are not patched again.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from instantstart.aws import eks as eks_api
from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import NotFound, PreconditionFailed, ProviderError
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import (
    get_cluster,
    hyperpod_cluster_name,
    record_details,
    submit_for_cluster,
)
from instantstart.services.cluster.upgrade_plan import TARGET_DOC, addon_plan, build_plan
from instantstart.services.dependencies.addons import AddonSteps
from instantstart.services.dependencies.stage import target_of
from instantstart.validation import ClusterTag

KIND = "cluster_upgrade"
VERSION_TIMEOUT = 90 * 60  # EKS documents a control plane update as taking up to about an hour
SOFTWARE_TIMEOUT = 4 * 60 * 60
SOFTWARE_RUNNING = ("Pending", "InProgress", "RollbackInProgress")


class UpgradeRequest(WireModel):
    """The cluster (the active one when absent) and the version to move to (the plan's)."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Defaults to the active cluster.")
    target_version: str | None = Field(default=None, pattern=r"^1\.[0-9]{2}$", description=TARGET_DOC)


class UpgradeParams(ParamsModel):
    """Params of cluster_upgrade: the cluster and the Kubernetes version to reach."""

    cluster_tag: str
    region: str
    target_version: str


async def stage_control_plane(stage: StageContext) -> dict[str, Any]:
    """UpdateClusterVersion (its client token is the operation's, so a rerun adopts the update already running),
    then wait until DescribeUpdate says Successful and the cluster is ACTIVE on the target version."""
    p = stage.params_as(UpgradeParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    aws, name = stage.app.aws, row.eks_cluster_name
    cluster = await blocking(eks_api.describe_cluster, aws, p.region, name)
    if cluster is None:
        raise NotFound(f"EKS cluster {name} does not exist.")
    update_id = None
    if str(cluster["version"]) != p.target_version:
        update = await blocking(eks_api.update_cluster_version, aws, p.region, name, p.target_version,
                                f"instantstart-{stage.operation_id}"[:64])
        update_id = str(update["id"])
        await stage.progress(f"UpdateClusterVersion {name} {cluster['version']} → {p.target_version}: {update_id}")

    async def done() -> tuple[bool, str]:
        if update_id is not None:
            update = await blocking(eks_api.describe_update, aws, p.region, name, update_id)
            if update.get("status") in ("Failed", "Cancelled"):
                errors = "; ".join(f"{e.get('errorCode')}: {e.get('errorMessage')}" for e in update.get("errors") or [])
                raise ProviderError(f"The version update {update_id} of {name} is {update['status']}: {errors}",
                                    hint="Fix the cause EKS names, then operation_retry.", retryable=False)
        now = await blocking(eks_api.describe_cluster, aws, p.region, name) or {}
        finished = now.get("status") == "ACTIVE" and str(now.get("version")) == p.target_version
        return finished, f"{name}: {now.get('status')}, Kubernetes {now.get('version')}"

    await wait_until(stage, done, limit_seconds=VERSION_TIMEOUT, what=f"the version update of {name}")
    await record_details(stage, p.cluster_tag, kubernetesVersion=p.target_version)  # the EKS stage's fact, kept true
    return {"eksCluster": name, "version": p.target_version, "updateId": update_id}


async def stage_addons(stage: StageContext) -> dict[str, Any]:
    """Every add-on whose version does not run on the target moves to the version the plan names (UpdateAddon,
    PRESERVE keeps configuration changed on the cluster); one being created or updated is waited for first, so
    an update started by an interrupted attempt is adopted."""
    p = stage.params_as(UpgradeParams)
    app = stage.app
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    steps = AddonSteps(app, target_of(row, stage.operation_id), stage.progress)
    moved: dict[str, str] = {}
    plan = await blocking(addon_plan, app, row, p.target_version)
    for busy in [a for a in plan if a.status in ("CREATING", "UPDATING", "DELETING")]:
        await stage.progress(f"{busy.name}: {busy.status}; waiting before comparing")
        await steps.wait(busy.name, gone=busy.status == "DELETING")
    if any(a.status in ("CREATING", "UPDATING", "DELETING") for a in plan):
        plan = await blocking(addon_plan, app, row, p.target_version)  # compare with what the waits left
    for planned in plan:
        if planned.action == "blocked":
            raise PreconditionFailed(
                f"EKS offers no version of the add-on {planned.name} for Kubernetes {p.target_version}.",
                hint=f"Delete the add-on {planned.name} or replace it, then operation_retry.",
            )
        if planned.action != "update":
            continue
        await stage.progress(f"UpdateAddon {planned.name} {planned.current_version} → {planned.target_version}")
        request = {"clusterName": row.eks_cluster_name, "addonName": planned.name,
                   "addonVersion": planned.target_version, "resolveConflicts": "PRESERVE"}
        await blocking(eks_api.update_addon, app.aws, p.region, request)
        await steps.wait(planned.name)
        moved[planned.name] = f"{planned.current_version} → {planned.target_version}"
    final = await blocking(addon_plan, app, row, p.target_version)
    wrong = [a.name for a in final if not a.compatible]
    if wrong:
        raise ProviderError(f"Add-ons still on versions Kubernetes {p.target_version} does not run: {wrong}.",
                            hint="operation_retry moves them again.")
    return {"updated": moved, "versions": {a.name: a.current_version for a in final}}


async def stage_hyperpod_software(stage: StageContext) -> dict[str, Any]:
    """UpdateClusterSoftware unless every group is already on the latest image or an update runs; then wait
    until the cluster is InService with no group updating. Nothing to do without a HyperPod cluster."""
    p = stage.params_as(UpgradeParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    sm = HyperPod(stage.app.aws, p.region)
    name = hyperpod_cluster_name(row)
    cluster = await blocking(sm.describe_cluster, name)
    if cluster is None:
        return {"cluster": None, "message": "no HyperPod cluster: nothing to patch"}
    groups = list(cluster.get("InstanceGroups") or [])
    running = any(g.get("SoftwareUpdateStatus") in SOFTWARE_RUNNING for g in groups)
    if not running and any(g.get("ImageVersionStatus") != "UpToDate" for g in groups):
        await stage.progress(f"UpdateClusterSoftware {name}")
        await blocking(sm.update_cluster_software, name)

    async def done() -> tuple[bool, str]:
        now = await blocking(sm.describe_cluster, name) or {}
        states = {g["InstanceGroupName"]: g.get("SoftwareUpdateStatus", "-") for g in now.get("InstanceGroups", [])}
        failed = [g for g, s in states.items() if s in ("Failed", "RollbackComplete")]
        if failed:
            raise ProviderError(f"The software update of {name} failed for {', '.join(failed)}.", retryable=False,
                                hint="cluster_events shows why; operation_retry patches again.")
        busy = [g for g, s in states.items() if s in SOFTWARE_RUNNING]
        text = ", ".join(f"{g} {s}" for g, s in states.items())
        return now.get("ClusterStatus") == "InService" and not busy, f"{name}: {now.get('ClusterStatus')}; {text}"

    await wait_until(stage, done, limit_seconds=SOFTWARE_TIMEOUT, what=f"the software update of {name}")
    final = await blocking(sm.describe_cluster, name) or {}
    return {"cluster": name, "groups": {g["InstanceGroupName"]: g.get("CurrentImageReleaseVersion")
                                        for g in final.get("InstanceGroups", [])}}


KINDS.register(
    OperationKind(
        name=KIND,
        params=UpgradeParams,
        stages=(
            StageSpec("control-plane", stage_control_plane, max_attempts=5, timeout_seconds=VERSION_TIMEOUT + 600),
            StageSpec("addons", stage_addons, max_attempts=5, timeout_seconds=3600),
            StageSpec("hyperpod-software", stage_hyperpod_software, max_attempts=3,
                      timeout_seconds=SOFTWARE_TIMEOUT + 600),
        ),
    )
)


@operation(
    KIND,
    destructive=True,
    idempotent=False,
    method="POST",
    path="/clusters/upgrade",
    completion="operation_get",
    example={"targetVersion": "1.33"},
)
async def cluster_upgrade(ctx: CallContext, req: UpgradeRequest) -> OperationRef:
    """Upgrade the cluster (clusterTag, default the active one) to the next Kubernetes minor version
    (targetVersion; EKS cannot go back down): control plane (UpdateClusterVersion) → EKS add-ons each moved to a
    version that runs on the target (UpdateAddon) → HyperPod node software (UpdateClusterSoftware), each a stage
    that operation_retry resumes. Refused with the blockers of cluster_upgrade_plan (read it first) when any."""
    replayed = await ctx.app.runner.replay(KIND, ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    plan = await build_plan(ctx.app, req.cluster_tag, req.target_version)
    if plan.blockers:
        raise PreconditionFailed(
            f"The upgrade plan to {plan.target_version} has {len(plan.blockers)} blocker(s): "
            + "; ".join(plan.blockers),
            hint="cluster_upgrade_plan shows each blocker; resolve them, then upgrade.",
            details={"blockers": plan.blockers, "targetVersion": plan.target_version},
        )
    row = await blocking(get_cluster, ctx.app.db, plan.cluster_tag)
    params = UpgradeParams(cluster_tag=plan.cluster_tag, region=row.region, target_version=plan.target_version)
    return await submit_for_cluster(ctx, KIND, plan.cluster_tag, params, status_tool="operation_get",
                                    poll_after_seconds=60)
