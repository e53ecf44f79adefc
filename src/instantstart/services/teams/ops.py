"""Teams = HyperPod task governance: team_create/team_update/team_delete/team_list. A team is the namespace
hyperpod-ns-<team> on a cluster with a SageMaker compute quota under the cluster's scheduler config; the task
governance add-on (feature key `taskGovernance`) turns them into Kueue queues, members' jobs go into the team's
namespace and queue by default (`placement.py`), and job_get_status explains a queued job (`queueing.py`)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from sqlalchemy import select

from instantstart.aws import eks as eks_api
from instantstart.aws import governance as gov_api
from instantstart.aws import hyperpod as hyperpod_api
from instantstart.catalog import operation
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import Conflict, NotFound, PreconditionFailed
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking
from instantstart.services.base.registry import get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.teams.models import (
    Quota,
    SchedulerSettings,
    TeamCreateRequest,
    TeamList,
    TeamParams,
    TeamRef,
    TeamsRequest,
    TeamUpdateRequest,
    TeamView,
)
from instantstart.services.teams.queueing import queue_usage
from instantstart.store import teams as store
from instantstart.store.access import UserRow
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, utcnow

ADDON = "amazon-sagemaker-hyperpod-taskgovernance"


def _check_members(db: Database, members: list[str]) -> None:
    with db.read_session() as session:
        known = set(session.scalars(select(UserRow.name).where(UserRow.name.in_(members))))
    missing = sorted(set(members) - known)
    if missing:
        raise NotFound(f"members: no user named {', '.join(missing)}.",
                       hint="Create them with user_create first (`instantstart user list` shows who exists).")


def _target(app: AppContext, tag: str, instance_type: str | None) -> tuple[str, str]:
    """(region, HyperPod cluster ARN), refusing a cluster without HyperPod, without the task governance add-on, or
    without `instance_type` in its instance groups (blocking)."""
    row = get_cluster(app.db, tag)
    if not row.hyperpod_cluster_name:
        raise PreconditionFailed(f"Cluster {tag} has no HyperPod cluster; teams are HyperPod compute quotas.",
                                 hint="Create it with hyperpod_create first.")
    addon = eks_api.describe_addon(app.aws, row.region, row.eks_cluster_name, ADDON)
    if addon is None or addon.get("status") != "ACTIVE":
        state = "not installed" if addon is None else f"{addon.get('status')}"
        raise PreconditionFailed(
            f"Task governance (the EKS add-on {ADDON}) is {state} on cluster {tag}; teams need it.",
            hint='Enable it with hyperpod_update_advanced_features {"taskGovernance": {"enabled": true}}, wait '
            "for the operation, then create the team.")
    described = hyperpod_api.describe_cluster(app.aws, row.region, row.hyperpod_cluster_name)
    if described is None:
        raise NotFound(f"HyperPod cluster {row.hyperpod_cluster_name} of {tag} does not exist.",
                       hint="cluster_get_status shows what the cluster has.")
    types = sorted({str(g.get("InstanceType")) for g in described.get("InstanceGroups") or []})
    if instance_type is not None and instance_type not in types:
        raise PreconditionFailed(
            f"quota.instanceType: {instance_type} is not an instance type of cluster {tag} (it has "
            f"{', '.join(types) or 'no instance groups'}).", hint="Give one of the cluster's instance types.")
    return row.region, str(described["ClusterArn"])


def _view(app: AppContext, team: store.Team, row: ClusterRow) -> TeamView:
    found = gov_api.describe_quota(app.aws, row.region, team.quota_id)
    status = None if found is None else str(found.get("Status"))
    usage = queue_usage(app, row, f"{team.namespace}-clusterqueue") if found is not None else None
    return TeamView(name=team.name, cluster_tag=team.cluster_tag, namespace=team.namespace, queue=team.queue,
                    members=team.members, quota=team.settings, quota_id=team.quota_id, quota_status=status,
                    usage=usage, created_by=team.created_by)


async def stage_team_apply(stage: StageContext) -> dict[str, Any]:
    """team_create/team_update: the cluster's scheduler config, the team's compute quota, the team's record."""
    p = stage.params_as(TeamParams)
    app = stage.app

    def apply() -> dict[str, Any]:
        if p.scheduler is not None or gov_api.scheduler_config(app.aws, p.region, p.cluster_arn) is None:
            config = SchedulerSettings.model_validate(p.scheduler or {}).request()
            gov_api.put_scheduler_config(app.aws, p.region, p.cluster_arn, f"{p.cluster_tag}-policy"[:63], config)
        team = store.get_team(app.db, p.name, p.cluster_tag)
        settings = p.quota if p.quota is not None else (team.settings if team else {})
        request = Quota.model_validate(settings).request(p.name)
        if team is None or gov_api.describe_quota(app.aws, p.region, team.quota_id) is None:
            quota_id = gov_api.create_quota(app.aws, p.region, {"Name": p.name, "ClusterArn": p.cluster_arn,
                                                                "ActivationState": "Enabled", **request})
        else:
            quota_id = team.quota_id
            if p.quota is not None:
                gov_api.update_quota(app.aws, p.region, quota_id, request)
        members = p.members if p.members is not None else (team.members if team else [])
        saved = store.save_team(app.db, store.Team(p.name, p.cluster_tag, quota_id, settings, members,
                                                   team.created_by if team else p.by, utcnow()))
        return {"team": p.name, "namespace": saved.namespace, "queue": saved.queue, "quotaId": quota_id}

    await stage.progress(f"team {p.name}: compute quota on {p.cluster_arn}")
    return await blocking(apply)


async def stage_team_delete(stage: StageContext) -> dict[str, Any]:
    """team_delete: the compute quota, then the record (the namespace and what runs in it stay)."""
    p = stage.params_as(TeamParams)
    team = await to_thread.run_sync(store.get_team, stage.app.db, p.name, p.cluster_tag)
    if team is not None:
        await blocking(gov_api.delete_quota, stage.app.aws, p.region, team.quota_id)
        await to_thread.run_sync(store.delete_team, stage.app.db, p.name, p.cluster_tag)
    return {"team": p.name, "deleted": team is not None}


for _kind, _fn in (("team_create", stage_team_apply), ("team_update", stage_team_apply),
                   ("team_delete", stage_team_delete)):
    KINDS.register(OperationKind(name=_kind, params=TeamParams, stages=(StageSpec("apply", _fn, max_attempts=3),)))


def _by(ctx: CallContext) -> str:
    return ctx.principal.user if ctx.principal is not None else ""


@operation("team_create", destructive=False, idempotent=True, method="POST", path="/teams", completion="team_list",
           example={"name": "example-team", "quota": {"instanceType": "ml.g5.12xlarge", "accelerators": 2}})
async def team_create(ctx: CallContext, req: TeamCreateRequest) -> OperationRef:
    """Create a team on a cluster (operator): the namespace hyperpod-ns-<name> with a HyperPod compute quota
    (SageMaker CreateComputeQuota: GPUs or whole instances of one instance type, lend/borrow strategy and borrow
    limit, fair-share weight, whether its tasks preempt each other) under the cluster's scheduler config (created,
    or set from `scheduler`: priority classes, fair share). Needs the task governance add-on (feature key
    taskGovernance), which turns the quota into the team's Kueue queue hyperpod-ns-<name>-localqueue. Members
    submit jobs into the team's namespace and queue by default; job_get_status says why a queued job waits.
    The same request again changes nothing; a team that exists with other settings is refused (team_update)."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    await to_thread.run_sync(_check_members, ctx.app.db, req.members)
    existing = await to_thread.run_sync(store.get_team, ctx.app.db, req.name, tag)
    quota = req.quota.model_dump(by_alias=True, exclude_none=True)
    if existing is not None and (existing.settings != quota or sorted(existing.members) != sorted(req.members)):
        raise Conflict(f"Team {req.name} exists on cluster {tag} with other settings.",
                       hint="Change it with team_update, or delete it with team_delete first.")
    region, arn = await blocking(_target, ctx.app, tag, req.quota.instance_type)
    params = TeamParams(cluster_tag=tag, region=region, cluster_arn=arn, name=req.name, quota=quota,
                        members=list(req.members), by=_by(ctx),
                        scheduler=req.scheduler.model_dump(by_alias=True) if req.scheduler else None)
    return await submit_for_cluster(ctx, "team_create", tag, params, status_tool="team_list", poll_after_seconds=2)


@operation("team_update", destructive=False, idempotent=True, method="POST", path="/teams/{name}",
           completion="team_list", example={"name": "example-team", "members": []})
async def team_update(ctx: CallContext, req: TeamUpdateRequest) -> OperationRef:
    """Change a team (operator): its quota (UpdateComputeQuota; admitted jobs keep running, new admissions follow
    the new quota), its complete member list, or the cluster's scheduler config. Fields left out keep their
    value."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    if await to_thread.run_sync(store.get_team, ctx.app.db, req.name, tag) is None:
        raise NotFound(f"No team {req.name} on cluster {tag}.",
                       hint="team_list shows the teams; team_create makes one.")
    if req.members is not None:
        await to_thread.run_sync(_check_members, ctx.app.db, req.members)
    region, arn = await blocking(_target, ctx.app, tag, req.quota.instance_type if req.quota else None)
    params = TeamParams(cluster_tag=tag, region=region, cluster_arn=arn, name=req.name, by=_by(ctx),
                        quota=req.quota.model_dump(by_alias=True, exclude_none=True) if req.quota else None,
                        members=req.members,
                        scheduler=req.scheduler.model_dump(by_alias=True) if req.scheduler else None)
    return await submit_for_cluster(ctx, "team_update", tag, params, status_tool="team_list", poll_after_seconds=2)


@operation("team_delete", destructive=True, idempotent=True, method="POST", path="/teams/{name}/delete",
           completion="team_list", example={"name": "example-missing-team"})
async def team_delete(ctx: CallContext, req: TeamRef) -> OperationRef:
    """Delete a team (operator): its compute quota goes, and with it the team's Kueue queues; queued jobs of the
    team stay pending (no queue admits them), running ones keep running; the namespace stays."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    if await to_thread.run_sync(store.get_team, ctx.app.db, req.name, tag) is None:
        raise NotFound(f"No team {req.name} on cluster {tag}.", hint="team_list shows the teams.")
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    params = TeamParams(cluster_tag=tag, region=row.region, cluster_arn="", name=req.name, by=_by(ctx))
    return await submit_for_cluster(ctx, "team_delete", tag, params, status_tool="team_list", poll_after_seconds=2)


@operation("team_list", method="GET", path="/teams", example={})
async def team_list(ctx: CallContext, req: TeamsRequest) -> TeamList:
    """Every team (of one cluster when clusterTag is given) with its namespace, queue, members, the quota as given,
    SageMaker's status of its compute quota, and its Kueue queue now (admitted and pending jobs, accelerators in use
    and borrowed from other teams). Read-only."""
    teams = await to_thread.run_sync(store.list_teams, ctx.app.db, req.cluster_tag)

    def views() -> list[TeamView]:
        out = []
        for team in teams:
            out.append(_view(ctx.app, team, get_cluster(ctx.app.db, team.cluster_tag)))
        return out

    return TeamList(teams=await blocking(views))
