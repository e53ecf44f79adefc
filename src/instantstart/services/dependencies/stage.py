"""The dependencies stage of cluster creation (cluster_configure_dependencies) and its status tool."""

from __future__ import annotations

import asyncio
from typing import Any

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext, StageContext
from instantstart.errors import DependencyFailed, InstantStartError, InvalidInput, PreconditionFailed, ProviderError
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of
from instantstart.services.base.params import ClusterParams, stored
from instantstart.services.base.registry import (
    get_cluster,
    mirror_pipeline_stages,
    record_facts,
    resolve_tag,
    submit_for_cluster,
)
from instantstart.services.base.stage_status import stage_status
from instantstart.services.dependencies import manifests as dependency_manifests
from instantstart.services.dependencies.catalog import Dependency, load_catalog
from instantstart.services.dependencies.reconcile import DepResult, Reconciler, Target, workload_states
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

STAGE = "dependencies"
KIND = "cluster_configure_dependencies"
STATUS_TOOL = "cluster_get_dependency_status"
GOOD = ("ACTIVE", "DEGRADED")
ABSENT = ("NOT_INSTALLED", "UNKNOWN", "DELETING", "CREATE_FAILED", "DELETE_FAILED")


class ConfigureDependenciesRequest(WireModel):
    """Which cluster (the active one when absent)."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Defaults to the active cluster.")


class DependencyStatusRequest(WireModel):
    """Which cluster (the active one when absent)."""

    cluster_tag: ClusterTag | None = None


class DependencyView(WireModel):
    """One dependency: what the catalog wants, what the cluster has, and the verdict."""

    name: str
    source: str = Field(description="addon (EKS add-on) or helm (chart).")
    default: bool = Field(description="Installed by cluster_configure_dependencies (optional ones: features).")
    depends_on: list[str]
    desired: dict[str, Any]
    actual: dict[str, Any] = Field(description="A fresh (cached) look: add-on status, helm release, workloads.")
    status: str = Field(description="ACTIVE, DEGRADED, FAILED, BLOCKED, IN_PROGRESS or NOT_INSTALLED.")
    ready: bool
    action: str | None = Field(description="What the last reconcile did: created, updated, unchanged, …")
    message: str
    hint: str | None
    updated_at: str | None


class DependencyStatusResult(WireModel):
    """The dependencies stage of a cluster and every dependency; never an ambiguous null."""

    cluster_tag: str
    state: str = Field(description="NOT_STARTED, IN_PROGRESS, SUCCEEDED, FAILED or CANCELLED")
    terminal: bool
    operation_id: str | None
    message: str
    elapsed_seconds: float
    error: dict[str, Any] | None
    all_ready: bool
    dependencies: list[DependencyView]


def require_eks_ready(row: ClusterRow) -> None:
    """Dependencies need a finished EKS stage (or an imported cluster); PreconditionFailed otherwise."""
    if row.imported or (row.stages or {}).get("eks") == "SUCCEEDED":
        return
    raise PreconditionFailed(
        f"Cluster {row.tag}'s EKS stage is {(row.stages or {}).get('eks', 'NOT_STARTED')}, not SUCCEEDED.",
        hint="Finish the EKS stage first: poll cluster_get_eks_creation_status (operation_retry if it failed).",
        details={"clusterTag": row.tag, "stages": dict(row.stages or {})},
    )


def target_of(row: ClusterRow, operation_id: str | None) -> Target:
    """The reconcile target for a cluster row."""
    return Target(
        tag=row.tag,
        region=row.region,
        eks_cluster_name=row.eks_cluster_name,
        bucket=facts_of(row).bucket,
        operation_id=operation_id,
    )


def persist_results(db: Database, tag: str, results: list[DepResult]) -> dict[str, Any]:
    """Merge results into the cluster facts' dependencies (other entries kept); the merged map."""
    row = get_cluster(db, tag)
    merged = facts_of(row).dependency_map()
    for result in results:
        merged[result.name] = result.to_dict()
    record_facts(db, tag, dependencies=merged)
    return merged


async def reconcile_dependencies(
    app: AppContext,
    stage: StageContext,
    tag: str,
    names: list[str] | tuple[str, ...],
    values: dict[str, dict[str, Any]] | None = None,
) -> list[DepResult]:
    """Reconcile `names` (plus what they need) on the cluster `tag`, persist each result, invalidate the
    status cache; raises a retryable or a permanent error naming the dependencies that failed.

    The entry point feature toggles reuse (hyperpod_update_advanced_features); `values` overrides the
    catalog's values per dependency name (a feature's computed add-on configuration)."""
    reconciler, row = await _reconciler(app, stage, tag, names, values)
    results = await reconciler.reconcile(names)
    await blocking(persist_results, app.db, tag, results)
    app.cache.invalidate(f"dep:{row.region}:{row.eks_cluster_name}:")
    failed = [r for r in results if r.status not in GOOD]
    if failed:
        text = "; ".join(f"{r.name}: {r.status}: {r.message}" for r in failed)
        hint = " ".join(dict.fromkeys(r.hint for r in failed if r.hint)) or None
        if all(r.action == "retryable" or r.status == "BLOCKED" for r in failed) and any(
            r.action == "retryable" for r in failed
        ):
            raise ProviderError(f"Dependencies not ready: {text}", hint=hint)
        raise DependencyFailed(f"Dependencies failed: {text}", hint=hint)
    return results


async def remove_dependencies(
    app: AppContext, stage: StageContext, tag: str, names: list[str] | tuple[str, ...]
) -> list[DepResult]:
    """Uninstall `names` from the cluster `tag` (a feature turned off), persist each result, invalidate the
    status cache; DependencyFailed naming what could not be removed (e.g. still needed by another)."""
    reconciler, row = await _reconciler(app, stage, tag, names)
    results = await reconciler.remove(names)
    await blocking(persist_results, app.db, tag, results)
    app.cache.invalidate(f"dep:{row.region}:{row.eks_cluster_name}:")
    failed = [r for r in results if r.status == "FAILED"]
    if failed:
        text = "; ".join(f"{r.name}: {r.message}" for r in failed)
        hint = " ".join(dict.fromkeys(r.hint for r in failed if r.hint)) or None
        raise DependencyFailed(f"Dependencies not removed: {text}", hint=hint)
    return results


async def _reconciler(
    app: AppContext,
    stage: StageContext,
    tag: str,
    names: list[str] | tuple[str, ...],
    values: dict[str, dict[str, Any]] | None = None,
) -> tuple[Reconciler, ClusterRow]:
    row = await blocking(get_cluster, app.db, tag)
    try:
        require_eks_ready(row)
    except PreconditionFailed:
        raise
    catalog = load_catalog()
    unknown = sorted(set(names) - set(catalog.names))
    if unknown:
        raise InvalidInput(
            f"Unknown dependencies: {', '.join(unknown)}.",
            hint=f"Known: {', '.join(catalog.names)}.",
        )
    return Reconciler(app, target_of(row, stage.operation_id), stage.progress, catalog, values), row


async def stage_dependencies(stage: StageContext) -> dict[str, Any]:
    """The dependencies stage: reconcile the catalog's default dependencies on the cluster of the params."""
    p = stage.params_as(ClusterParams)
    results = await reconcile_dependencies(stage.app, stage, p.cluster_tag, load_catalog().defaults)
    return {"dependencies": {r.name: {"status": r.status, "action": r.action, **r.actual} for r in results}}


DEPENDENCIES_STAGE = StageSpec(STAGE, stage_dependencies, max_attempts=3, timeout_seconds=3600, backoff_seconds=5)
KINDS.register(
    OperationKind(name=KIND, params=ClusterParams, stages=(DEPENDENCIES_STAGE,), mirror=mirror_pipeline_stages)
)


@operation(
    KIND,
    destructive=False,
    idempotent=True,
    method="POST",
    path="/clusters/dependencies",
    completion=STATUS_TOOL,
    example={},
)
async def cluster_configure_dependencies(ctx: CallContext, req: ConfigureDependenciesRequest) -> OperationRef:
    """Reconcile the dependency catalog on the active cluster (or clusterTag): the EKS Pod Identity agent,
    the HyperPod dependencies helm chart (health monitoring agent, NVIDIA and EFA device plugins), the
    Mountpoint for S3 CSI driver with a Pod Identity role limited to the project bucket, and metrics-server,
    in dependency order, each checked for readiness and reported separately. Needs a finished EKS stage
    (PRECONDITION_FAILED otherwise). Re-running changes nothing when everything already matches."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    require_eks_ready(row)
    return await submit_for_cluster(
        ctx,
        KIND,
        tag,
        stored(ClusterParams(cluster_tag=tag, region=row.region)),
        status_tool=STATUS_TOOL,
        poll_after_seconds=15,
    )


async def live_look(app: AppContext, row: ClusterRow, dep: Dependency) -> dict[str, Any]:
    """What the cluster has for one dependency right now (cached per status interval, single flight)."""

    async def fetch() -> dict[str, Any]:
        target = target_of(row, None)
        reconciler = Reconciler(app, target, _quiet)
        try:
            if dep.source == "manifests":
                assert dep.manifests is not None
                api = await blocking(reconciler.kube_api)
                present, wanted = await blocking(dependency_manifests.present, api, dep.manifests)
                if present == 0:
                    return {"status": "NOT_INSTALLED", "ready": False}
                return {
                    "status": "ACTIVE" if present == wanted else "DEGRADED",
                    "objects": f"{present}/{wanted}",
                    "ready": present == wanted,
                }
            if dep.source == "addon":
                assert dep.addon is not None
                addon = await blocking(reconciler.describe_addon, dep.addon)
                if addon is None:
                    return {"status": "NOT_INSTALLED", "ready": False}
                issues = [i.get("message") for i in (addon.get("health") or {}).get("issues") or []]
                look = {"status": addon.get("status"), "version": addon.get("addonVersion"), "issues": issues}
                look["ready"] = addon.get("status") == "ACTIVE"
            else:
                assert dep.release is not None
                helm = await reconciler.helm()
                release = await blocking(helm.release, dep.release, dep.namespace)
                if release is None:
                    return {"status": "NOT_INSTALLED", "ready": False}
                look = {
                    "status": release.get("status"),
                    "chart": release.get("chart"),
                    "revision": int(release.get("revision") or 0),
                    "ready": release.get("status") == "deployed",
                }
            refs = [("DaemonSet", r) for r in dep.readiness.daemon_sets] + [
                ("Deployment", r) for r in dep.readiness.deployments
            ]
            if refs and look["status"] not in ("NOT_INSTALLED",):
                states = await blocking(workload_states, app, target, refs)
                look["workloads"] = states
                look["ready"] = bool(look["ready"]) and all(s["ready"] for s in states)
            return look
        except InstantStartError as exc:
            return {"status": "UNKNOWN", "ready": False, "error": exc.message}

    value: dict[str, Any] = await app.cache.get(f"dep:{row.region}:{row.eks_cluster_name}:{dep.name}", fetch)
    return value


async def _quiet(_message: str) -> None:
    return None


def _view(
    dep: Dependency, saved: dict[str, Any], actual: dict[str, Any], stage_state: str, present: set[str]
) -> DependencyView:
    """One dependency as the status shows it: what the stage recorded (`saved`), corrected by what the cluster
    has now (`actual`): an ACTIVE one no longer ready is DEGRADED, and a DEGRADED add-on names the add-ons it
    needs that are gone (`present`: the names installed now)."""
    status = saved.get("status") or ("IN_PROGRESS" if stage_state == "IN_PROGRESS" else "NOT_INSTALLED")
    message = saved.get("message") or ("waiting for its turn" if status == "IN_PROGRESS" else "not installed")
    hint = saved.get("hint")
    if status == "ACTIVE" and not actual.get("ready") and actual.get("status") != "UNKNOWN":
        status = "DEGRADED"
        message = f"was ACTIVE; now {actual.get('status')}"
        hint = "Run cluster_configure_dependencies to reconcile it again."
    missing = [p for p in dep.depends_on if p not in present]
    if actual.get("status") == "DEGRADED" and missing:
        # EKS keeps an add-on DEGRADED while an add-on it needs is gone; say which, not "wait for nodes".
        status = "DEGRADED"
        message = f"DEGRADED: {'; '.join(map(str, actual.get('issues') or [])) or 'pods not ready'}"
        hint = (f"It needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed: "
                f"install {'it' if len(missing) == 1 else 'them'} again (cluster_configure_dependencies, or the "
                "feature that needs it); the add-on recovers by itself once they are ACTIVE.")
    return DependencyView(
        name=dep.name,
        source=dep.source,
        default=dep.default,
        depends_on=list(dep.depends_on),
        desired=saved.get("desired") or _desired(dep),
        actual=actual,
        status=status,
        ready=bool(actual.get("ready")),
        action=saved.get("action"),
        message=message,
        hint=hint,
        updated_at=saved.get("updatedAt"),
    )


@operation(STATUS_TOOL, method="GET", path="/clusters/dependency-status", example={})
async def cluster_get_dependency_status(ctx: CallContext, req: DependencyStatusRequest) -> DependencyStatusResult:
    """Every catalog dependency of a cluster (the active one when clusterTag is absent): desired version
    and values, what the cluster has right now (EKS add-on status, helm release, DaemonSet/Deployment
    readiness; looked up at most once per status interval), status (ACTIVE, DEGRADED, FAILED with a hint,
    BLOCKED, IN_PROGRESS, NOT_INSTALLED), plus the dependencies stage's state. Poll until terminal."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    stage = await stage_status(ctx, tag, STAGE, (KIND, "cluster_create"))
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    catalog = load_catalog()
    persisted: dict[str, Any] = facts_of(row).dependency_map()
    eks_done = row.imported or (row.stages or {}).get("eks") == "SUCCEEDED"
    names = [n for n in catalog.names if n in persisted or catalog.get(n).default]
    if eks_done:
        looks = await asyncio.gather(*(live_look(ctx.app, row, catalog.get(n)) for n in names))
    else:
        looks = [{"status": "NOT_INSTALLED", "ready": False, "reason": "the EKS stage has not finished"}] * len(names)
    present = {n for n, look in zip(names, looks, strict=True) if look.get("status") not in ABSENT}
    views = [
        _view(catalog.get(name), persisted.get(name) or {}, actual, stage.state, present)
        for name, actual in zip(names, looks, strict=True)
    ]
    return DependencyStatusResult(
        cluster_tag=tag,
        state=stage.state,
        terminal=stage.terminal,
        operation_id=stage.operation_id,
        message=stage.message,
        elapsed_seconds=stage.elapsed_seconds,
        error=stage.error,
        all_ready=bool(views) and all(v.ready for v in views if v.default),
        dependencies=views,
    )


def _desired(dep: Dependency) -> dict[str, Any]:
    if dep.source == "addon":
        return {"addon": dep.addon, "version": dep.version or "default", "values": dep.values}
    return {"chart": dep.chart, "release": dep.release, "version": dep.version, "values": dep.values}
