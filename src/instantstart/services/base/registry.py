"""Clusters: the registry of managed clusters and the active-cluster choice."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from anyio import to_thread
from pydantic import Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import Conflict, InstantStartError, NotFound, PreconditionFailed, ProviderError
from instantstart.kube.reads import cluster_version
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import stored_changes
from instantstart.services.base.target import cluster_of, cluster_target
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, OperationRow, StateRow, utcnow
from instantstart.store.state import read_state, write_state
from instantstart.store.usage import record_workload
from instantstart.validation import ClusterTag, Region

ACTIVE_CLUSTER_KEY = "active_cluster"


class ClusterParams(ParamsModel):
    """Params of a kind that acts on one managed cluster in its Region (stored as clusterTag, region)."""

    cluster_tag: str
    region: str


class SwitchParams(ParamsModel):
    """Params of cluster_switch: the cluster to make active."""

    cluster_tag: str


class ClusterSummary(WireModel):
    """One managed cluster as cluster_list_all shows it."""

    cluster_tag: str
    region: str
    eks_cluster_name: str
    hyperpod_cluster_name: str | None
    imported: bool
    active: bool
    stages: dict[str, Any] = Field(description="Stage name → status of its creation pipeline.")
    created_at: datetime


class ClusterListResult(WireModel):
    """Every managed cluster and which one is active."""

    clusters: list[ClusterSummary]
    active_cluster: str | None
    count: int


class ClusterSwitchRequest(WireModel):
    """The cluster to make active."""

    cluster_tag: ClusterTag


def _summary(row: ClusterRow, active: str | None) -> ClusterSummary:
    return ClusterSummary(
        cluster_tag=row.tag,
        region=row.region,
        eks_cluster_name=row.eks_cluster_name,
        hyperpod_cluster_name=row.hyperpod_cluster_name,
        imported=row.imported,
        active=row.tag == active,
        stages=dict(row.stages or {}),
        created_at=row.created_at,
    )


def active_cluster_tag(db: Database) -> str | None:
    """The tag of the active cluster, if one is set."""
    value = read_state(db, ACTIVE_CLUSTER_KEY)
    return str(value) if value else None


def list_clusters(db: Database) -> ClusterListResult:
    """Every cluster row, oldest first, with the active flag."""
    active = active_cluster_tag(db)
    with db.session() as session:
        rows = session.scalars(select(ClusterRow).order_by(ClusterRow.created_at, ClusterRow.tag)).all()
        items = [_summary(r, active) for r in rows]
    return ClusterListResult(clusters=items, active_cluster=active, count=len(items))


def get_cluster(db: Database, tag: str) -> ClusterRow:
    """One cluster row; NotFound with the known tags otherwise."""
    with db.read_session() as session:
        row = session.get(ClusterRow, tag)
        if row is not None:
            session.expunge(row)
            return row
        known = session.scalars(select(ClusterRow.tag).order_by(ClusterRow.tag)).all()
    raise NotFound(
        f"No managed cluster has the tag {tag!r}.",
        hint=f"Known tags: {', '.join(known)}." if known else "Create one with cluster_create_eks or import one.",
        details={"knownTags": list(known)},
    )


def default_hyperpod_name(tag: str) -> str:
    """The HyperPod cluster name a new cluster gets: `hp-cluster-<tag>`."""
    return f"hp-cluster-{tag}"


def hyperpod_cluster_name(row: ClusterRow) -> str:
    """The HyperPod cluster name of a managed cluster: the recorded one, else `hp-cluster-<tag>`."""
    return row.hyperpod_cluster_name or default_hyperpod_name(row.tag)


async def submit_for_cluster(
    ctx: CallContext,
    kind: str,
    tag: str,
    params: dict[str, Any] | ParamsModel,
    *,
    status_tool: str,
    poll_after_seconds: int,
    workload: tuple[str, str] | None = None,
) -> OperationRef:
    """Record a mutation of one cluster: the cluster is the target (one at a time), the caller's
    idempotency key makes a retry return the same operation. `params`: the kind's params model (stored as
    dumped, once), or a dict validated as it. `workload`: (namespace, name) of the job or model server this
    submits, recorded with the calling user as its submitter (usage_report attributes its pods to them)."""
    model = params if isinstance(params, ParamsModel) else ctx.app.runner.params_model(kind, params)
    if workload is not None and ctx.principal is not None:
        await to_thread.run_sync(record_workload, ctx.app.db, tag, *workload, ctx.principal.user, utcnow())
    return await ctx.app.runner.submit(
        kind,
        model,
        target=cluster_target(tag),
        idempotency_key=ctx.idempotency_key,
        status_tool=status_tool,
        poll_after_seconds=poll_after_seconds,
    )


def insert_cluster(db: Database, row: ClusterRow, *, hint: str) -> None:
    """Add a cluster row; a tag already in use is a Conflict naming the field."""
    try:
        with db.session() as session:
            session.add(row)
    except IntegrityError:
        raise Conflict(
            f"The cluster tag {row.tag!r} is already in use.",
            hint=hint,
            details={"fields": [{"field": "clusterTag", "message": "already in use"}]},
        ) from None


def record_facts(db: Database, tag: str, **changes: Any) -> None:
    """Merge facts stages learned into a cluster row (keyed by ClusterFacts field name; see `stored_changes`);
    stage statuses come from the engine only. A fact set to None is stored as null."""
    stored = stored_changes(changes)
    with db.session() as session:
        row = session.get(ClusterRow, tag)
        if row is None:
            return
        if stored:
            row.details = {**(row.details or {}), **stored}
        row.updated_at = utcnow()


async def record_details(stage: StageContext, tag: str, **details: Any) -> None:
    """Merge facts a stage learned (network ids, outputs) into the cluster row's details. Stage statuses are
    not written here: the engine mirrors them (see `mirror_pipeline_stages`)."""
    await blocking(record_facts, stage.app.db, tag, **details)


PIPELINE_STAGES = ("eks", "activate", "dependencies", "hyperpod", "storage", "verification")


def mirror_pipeline_stages(session: Session, target: str | None, stages: list[dict[str, Any]]) -> None:
    """The stage mirror of the creation-pipeline kinds: copy each pipeline stage's status onto the cluster
    row's stage view, inside the transaction that changes the operation, so cluster_list_all can never
    disagree with the operation. A PENDING stage does not overwrite a status an earlier operation left."""
    tag = cluster_of(target)
    if tag is None:
        return
    row = session.get(ClusterRow, tag)
    if row is None:
        return
    view = dict(row.stages or {})
    for stage in stages:
        name, status = stage["name"], stage["status"]
        if name in PIPELINE_STAGES and (status != "PENDING" or name not in view):
            view[name] = status
    if view != (row.stages or {}):
        row.stages = view
        row.updated_at = utcnow()


# Operation kinds that bring a cluster (or its HyperPod cluster) into being: the newest one submitted
# since the active cluster was last chosen decides what an argument-less call means (see `default_tag`).
CREATION_KINDS = ("cluster_create", "cluster_create_eks", "hyperpod_create")


def recent_creation_tag(db: Database) -> str | None:
    """The cluster of the newest creation submitted after the active cluster was last chosen (whatever its
    status: in flight, failed or done), if that cluster is still registered."""
    with db.session() as session:
        active = session.get(StateRow, ACTIVE_CLUSTER_KEY)
        query = select(OperationRow.target).where(OperationRow.kind.in_(CREATION_KINDS))
        if active is not None and active.value:
            query = query.where(OperationRow.created_at > active.updated_at)
        target = session.scalars(
            query.order_by(OperationRow.created_at.desc(), OperationRow.id.desc()).limit(1)
        ).first()
        tag = cluster_of(target)
        if tag is None:
            return None
        return tag if session.get(ClusterRow, tag) is not None else None


def default_tag(db: Database) -> str | None:
    """The cluster an argument-less call means, the same for every tool whose clusterTag is optional: the
    cluster of the newest creation (cluster_create, cluster_create_eks, hyperpod_create) submitted since
    the active cluster was last chosen — in flight, failed or finished — else the active cluster. So an
    agent polling the creation it just started never gets another cluster's status, not even on the poll
    after it finished; choosing a cluster (cluster_switch) makes the active one the default again."""
    return recent_creation_tag(db) or active_cluster_tag(db)


def resolve_tag(db: Database, tag: str | None) -> str:
    """The given cluster tag, or `default_tag`'s; a clear error when neither exists."""
    if tag:
        get_cluster(db, tag)
        return tag
    active = default_tag(db)
    if active is None:
        raise PreconditionFailed(
            "No cluster is active or being created, and no clusterTag was given.",
            hint="Pass clusterTag, or choose one with cluster_switch (cluster_list_all lists them).",
        )
    return active


class RegionScope(WireModel):
    """Which Region a lookup answers for: `region`, else the named cluster's, else the default
    cluster's (see `default_tag`), else the server's."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Answer for this cluster's Region.")
    region: Region | None = Field(default=None, description="Answer for this Region (wins over clusterTag).")


def scope_region(db: Database, scope: RegionScope, server_region: str) -> str:
    """The Region a lookup answers for (blocking; see RegionScope)."""
    if scope.region:
        return scope.region
    tag = scope.cluster_tag or default_tag(db)
    if tag:
        return get_cluster(db, tag).region
    return server_region


def set_active_cluster(db: Database, tag: str) -> None:
    """Record `tag` as the active cluster."""
    write_state(db, ACTIVE_CLUSTER_KEY, tag)


async def activate_cluster(stage: StageContext, tag: str) -> dict[str, Any]:
    """Record cluster `tag` as the active one (NotFound when it is not managed)."""
    db = stage.app.db
    await to_thread.run_sync(get_cluster, db, tag)
    await to_thread.run_sync(set_active_cluster, db, tag)
    await stage.progress(f"active cluster is now {tag}")
    return {"activeCluster": tag}


async def reach_cluster(stage: StageContext, tag: str) -> dict[str, Any]:
    """Prove the control plane reaches cluster `tag`'s Kubernetes API with an EKS token it made itself."""
    row = await to_thread.run_sync(get_cluster, stage.app.db, tag)
    kube = stage.app.kube

    def probe() -> dict[str, Any]:
        try:
            version, namespaces = cluster_version(kube.api_client(row.eks_cluster_name, row.region))
        except InstantStartError as exc:
            exc.retryable = True
            raise
        except Exception as exc:
            kube.forget(row.eks_cluster_name, row.region)
            raise ProviderError(
                f"Kubernetes API of {row.eks_cluster_name} not reachable: {type(exc).__name__}: "
                f"{getattr(exc, 'reason', exc)}",
                hint="Check the EKS stage and the access entry of this control plane.",
            ) from exc
        return {"kubernetesVersion": version, "namespaces": namespaces}

    result = await to_thread.run_sync(probe)
    await stage.progress(f"reached {row.eks_cluster_name}: Kubernetes {result['kubernetesVersion']}")
    return result


async def stage_switch_activate(stage: StageContext) -> dict[str, Any]:
    """cluster_switch: record the cluster as the active one."""
    return await activate_cluster(stage, stage.params_as(SwitchParams).cluster_tag)


async def stage_switch_reach(stage: StageContext) -> dict[str, Any]:
    """cluster_switch: prove the new active cluster's Kubernetes API answers."""
    return await reach_cluster(stage, stage.params_as(SwitchParams).cluster_tag)


KINDS.register(
    OperationKind(
        name="cluster_switch",
        params=SwitchParams,
        stages=(
            StageSpec("activate", stage_switch_activate),
            StageSpec(
                "reach",
                stage_switch_reach,
                max_attempts=6,
                timeout_seconds=120,
                backoff_seconds=2,
                backoff_max_seconds=20,
            ),
        ),
    )
)


@operation(
    "cluster_switch",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/clusters/{clusterTag}/switch",
    completion="cluster_list_all",
    example={"clusterTag": "demo"},
)
async def cluster_switch(ctx: CallContext, req: ClusterSwitchRequest) -> OperationRef:
    """Make the cluster with this tag the active one (the cluster every cluster-scoped tool acts on
    when no clusterTag is given), then prove the control plane reaches its Kubernetes API with an EKS
    token it makes itself. An unknown tag is refused with NOT_FOUND before anything changes."""
    await to_thread.run_sync(get_cluster, ctx.app.db, req.cluster_tag)
    return await ctx.app.runner.submit(
        "cluster_switch",
        SwitchParams(cluster_tag=req.cluster_tag),
        target="state:active-cluster",
        idempotency_key=ctx.idempotency_key,
        status_tool="cluster_list_all",
        poll_after_seconds=1,
    )
