"""hyperpod_update_lifecycle_script: a new on_create.sh for one instance group, uploaded to the cluster's bucket
under a key named by its SHA-256 (recorded in the cluster's facts: every later check of the script expects that
hash), UpdateCluster with the group's new LifeCycleConfig, and applied to new nodes only or rolled through the
existing ones with the batching of a software update (HyperPod runs the lifecycle again on every node it updates)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Literal

from anyio import to_thread
from pydantic import ConfigDict, Field

from instantstart.aws import identity, s3
from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import Conflict, InvalidInput, NotFound
from instantstart.manifests import iam_policies as pol
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_groups import described
from instantstart.services.base.lifecycle import ON_CREATE
from instantstart.services.base.registry import get_cluster, hyperpod_cluster_name, record_facts, submit_for_cluster
from instantstart.services.capacity.group_allowlist import resubmit_spec
from instantstart.services.capacity.software import rolling
from instantstart.services.capacity.software.models import (
    GROUP_NAME,
    DeploymentConfig,
    SoftwareParams,
    SoftwareRequest,
    api_request,
)
from instantstart.services.capacity.software.plan import row_for
from instantstart.validation import ClusterTag

MAX_SCRIPT = 64 * 1024
Apply = Literal["newNodes", "rolling"]


class LifecycleRequest(WireModel):
    """The group, its new on_create.sh, and whether existing nodes run it now (rolling) or only new ones."""

    # The script is uploaded byte for byte as given (its hash is what every later check expects): no stripping.
    model_config = ConfigDict(**{**WireModel.model_config, "str_strip_whitespace": False})

    cluster_tag: ClusterTag | None = None
    instance_group_name: str = Field(min_length=1, max_length=63, pattern=GROUP_NAME)
    script: str = Field(min_length=3, max_length=MAX_SCRIPT, description="The on_create.sh, starting with #!.")
    apply: Apply = Field(default="newNodes", description="newNodes: nodes launched from now on run it; rolling: "
                         "the existing nodes run it too, batch by batch (deploymentConfig).")
    deployment_config: DeploymentConfig | None = None


class LifecycleParams(SoftwareParams):
    """Params of lifecycle_script_update: the software update's (for the roll) plus the group and the script."""

    instance_group: str
    script: str
    sha256: str
    apply: Apply


def script_key(tag: str, group: str, sha: str) -> str:
    """Where a group's uploaded script lives: under the cluster's lifecycle prefix, named by its hash."""
    return f"{pol.lifecycle_prefix(tag)}groups/{group}/{sha[:16]}/{ON_CREATE}"


async def stage_upload(stage: StageContext) -> dict[str, Any]:
    """Upload the script (unless that exact content is there), check its hash, record it in the facts."""
    p = stage.params_as(LifecycleParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    bucket = facts_of(row).need("bucket")
    key = script_key(p.cluster_tag, p.instance_group, p.sha256)
    account = await blocking(identity.account_id, stage.app.aws, p.region)
    if await blocking(s3.object_sha256, stage.app.aws, p.region, bucket, key, account) != p.sha256:
        await stage.progress(f"upload s3://{bucket}/{key}")
        await blocking(s3.put_object, stage.app.aws, p.region, bucket, key, p.script.encode(), "text/x-shellscript",
                       account)
    found = await blocking(s3.object_sha256, stage.app.aws, p.region, bucket, key, account)
    if found != p.sha256:
        raise Conflict(f"s3://{bucket}/{key} has sha256 {found} right after the upload, not {p.sha256}.",
                       hint="Someone else writes under the lifecycle prefix: find them in CloudTrail, then retry.")
    record = {"bucket": bucket, "key": key, "sha256": p.sha256, "sourceS3Uri": f"s3://{bucket}/{key[:-len(ON_CREATE)]}",
              "uploadedAt": datetime.now(UTC).isoformat(), "operationId": stage.operation_id}
    scripts = {**facts_of(row).lifecycle_scripts, p.instance_group: record}
    await blocking(record_facts, stage.app.db, p.cluster_tag, lifecycle_scripts=scripts)
    return record


async def stage_configure(stage: StageContext) -> dict[str, Any]:
    """UpdateCluster with the group's allowlisted spec and the new LifeCycleConfig, until the group is InService."""
    p = stage.params_as(LifecycleParams)
    row = await blocking(get_cluster, stage.app.db, p.cluster_tag)
    sm = HyperPod(stage.app.aws, p.region)
    name = hyperpod_cluster_name(row)
    uri = stage.outputs["upload"]["sourceS3Uri"]

    def group_of(cluster: dict[str, Any] | None) -> dict[str, Any]:
        found: dict[str, Any] | None = next((g for g in (cluster or {}).get("InstanceGroups") or []
                                             if g.get("InstanceGroupName") == p.instance_group), None)
        if found is None:
            raise NotFound(f"Instance group {p.instance_group} does not exist in {name}.")
        return found

    group = group_of(await blocking(sm.describe_cluster, name))
    if (group.get("LifeCycleConfig") or {}).get("SourceS3Uri") != uri:
        spec = resubmit_spec(group)
        spec["LifeCycleConfig"] = {**(spec.get("LifeCycleConfig") or {}), "SourceS3Uri": uri, "OnCreate": ON_CREATE}
        await stage.progress(f"UpdateCluster {name}: {p.instance_group} LifeCycleConfig {uri}")
        await blocking(sm.update_cluster, f"update the lifecycle script of {p.instance_group}", ClusterName=name,
                       InstanceGroups=[spec])

    async def settled() -> tuple[bool, str]:
        cluster = await blocking(sm.describe_cluster, name)
        now = group_of(cluster)
        status = (cluster or {}).get("ClusterStatus")
        return status == "InService" and now.get("Status") == "InService", f"{name} {status}, group {now.get('Status')}"

    await wait_until(stage, settled, limit_seconds=3600, what=f"UpdateCluster of {p.instance_group}")
    return {"instanceGroup": p.instance_group, "sourceS3Uri": uri, "onCreate": ON_CREATE}


def _only_rolling(fn: Any) -> Any:
    async def stage_fn(stage: StageContext) -> dict[str, Any]:
        if stage.params_as(LifecycleParams).apply != "rolling":
            return {"skipped": "apply newNodes: existing nodes keep the script they ran; new nodes run the new one"}
        result: dict[str, Any] = await fn(stage)
        return result

    return stage_fn


KINDS.register(
    OperationKind(
        name="lifecycle_script_update",
        params=LifecycleParams,
        stages=(
            StageSpec("upload", stage_upload, max_attempts=3, backoff_seconds=3),
            StageSpec("configure", stage_configure, max_attempts=3, timeout_seconds=3900, backoff_seconds=3),
            StageSpec("plan", _only_rolling(rolling.stage_plan), max_attempts=3, backoff_seconds=3),
            StageSpec("update", _only_rolling(rolling.stage_update), max_attempts=3,
                      timeout_seconds=rolling.SOFTWARE_TIMEOUT + 600),
            StageSpec("report", _only_rolling(rolling.stage_report), max_attempts=3, backoff_seconds=3),
        ),
    )
)


@operation(
    "hyperpod_update_lifecycle_script",
    destructive=True,
    idempotent=False,
    method="POST",
    path="/capacity/lifecycle-script",
    completion="operation_get",
    example={"instanceGroupName": "workers", "script": "#!/bin/bash\nset -euo pipefail\n", "apply": "newNodes"},
)
async def hyperpod_update_lifecycle_script(ctx: CallContext, req: LifecycleRequest) -> OperationRef:
    """Give one instance group a new lifecycle script (on_create.sh, run as root on every node; it must start
    with #! and hold no secret: it is stored in the cluster's bucket and in this operation's params). It is
    uploaded under the cluster's lifecycle prefix, named by its SHA-256, which the cluster's facts record: every
    later node launch, replacement and software update verifies the script against it (CONFLICT when it changed).
    UpdateCluster points the group's LifeCycleConfig at it. apply newNodes (default): nodes launched from now on
    run it; apply rolling: the existing nodes run it too, batch by batch as deploymentConfig says (the same as
    hyperpod_update_software: UpdateClusterSoftware of this group at its current release, with alarm roll back)."""
    if not req.script.startswith("#!"):
        raise InvalidInput("Invalid input: script: a lifecycle script starts with #! (e.g. #!/bin/bash).",
                           details={"fields": [{"field": "script", "message": "no #! line"}]})
    if req.deployment_config is not None and req.apply != "rolling":
        raise InvalidInput("Invalid input: deploymentConfig: only apply rolling rolls the script through nodes.",
                           hint="Set apply to rolling, or leave deploymentConfig out.",
                           details={"fields": [{"field": "deploymentConfig", "message": "needs apply rolling"}]})
    replayed = await ctx.app.runner.replay("lifecycle_script_update", ctx.idempotency_key, status_tool="operation_get")
    if replayed is not None:
        return replayed
    row = await to_thread.run_sync(row_for, ctx.app.db, SoftwareRequest(cluster_tag=req.cluster_tag))
    cluster = await described(ctx.app, row)
    group = next((g for g in cluster.get("InstanceGroups") or [] if g["InstanceGroupName"] == req.instance_group_name),
                 None)
    if group is None:
        names = ", ".join(g["InstanceGroupName"] for g in cluster.get("InstanceGroups") or [])
        raise NotFound(f"Invalid input: instanceGroupName: {req.instance_group_name} is not a group of "
                       f"{hyperpod_cluster_name(row)} (groups: {names})",
                       details={"fields": [{"field": "instanceGroupName", "message": "no such group"}]})
    facts_of(row).need("bucket")
    roll = [{"InstanceGroupName": req.instance_group_name,
             "ImageReleaseVersion": group.get("CurrentImageReleaseVersion")}]
    params = LifecycleParams(
        cluster_tag=row.tag, region=row.region, instance_group=req.instance_group_name, script=req.script,
        sha256=hashlib.sha256(req.script.encode()).hexdigest(), apply=req.apply,
        instance_groups=[{k: v for k, v in roll[0].items() if v}],
        deployment_config=api_request(SoftwareRequest(deployment_config=req.deployment_config)).get("DeploymentConfig"),
    )
    return await submit_for_cluster(ctx, "lifecycle_script_update", row.tag, params, status_tool="operation_get",
                                    poll_after_seconds=30)

