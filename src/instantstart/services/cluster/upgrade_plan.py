"""cluster_upgrade_plan: what moving a cluster to the next Kubernetes minor version involves, and what blocks it.

EKS add-ons installed and the version each must move to (DescribeAddonVersions for the target version), the helm
releases the dependency catalog installed and whether their chart allows the target (its kubeVersion), the APIs
our objects use that the target no longer serves, and the HyperPod nodes' software to patch afterwards.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import Field

from instantstart.aws import eks as eks_api
from instantstart.aws.hyperpod import HyperPod
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import InvalidInput, NotFound
from instantstart.manifests.kube_versions import minor_of, next_minor, removed_apis, satisfies
from instantstart.operations.waiting import blocking
from instantstart.services.base.registry import get_cluster, hyperpod_cluster_name, resolve_tag
from instantstart.services.dependencies import manifests as dependency_manifests
from instantstart.services.dependencies.addons import version_key
from instantstart.services.dependencies.catalog import Dependency, load_catalog
from instantstart.services.dependencies.reconcile import Reconciler
from instantstart.services.dependencies.stage import target_of
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

STAGES = ("control-plane", "addons", "hyperpod-software")
TARGET_DOC = "Kubernetes minor version to move to, e.g. 1.33; the one after the cluster's when absent."


class UpgradePlanRequest(WireModel):
    """Which cluster (the active one when absent) and the version to move to."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Defaults to the active cluster.")
    target_version: str | None = Field(default=None, pattern=r"^1\.[0-9]{2}$", description=TARGET_DOC)


class AddonUpgrade(WireModel):
    """One installed EKS add-on against the target version."""

    name: str
    status: str | None
    current_version: str | None
    compatible: bool = Field(description="The current version runs on the target Kubernetes version.")
    target_version: str | None = Field(description="The version to move to (the current one when compatible).")
    action: str = Field(description="keep, update, or blocked (EKS offers no version for the target).")


class ChartCheck(WireModel):
    """One helm release the dependency catalog installed, against the target version."""

    release: str
    namespace: str
    chart: str
    chart_version: str | None
    kube_version: str | None = Field(description="The chart's kubeVersion constraint (none: any version).")
    compatible: bool
    message: str


class RemovedApiUse(WireModel):
    """An object of ours on an API version the target no longer serves."""

    source: str = Field(description="The helm release or manifest set the object comes from.")
    kind: str
    name: str
    api_version: str
    removed_in: str
    replacement: str


class HyperPodSoftware(WireModel):
    """The HyperPod nodes' software, patched (UpdateClusterSoftware) after the control plane and add-ons."""

    cluster: str
    groups: list[dict[str, Any]] = Field(description="name, currentImageReleaseVersion, imageVersionStatus.")


class UpgradePlan(WireModel):
    """The upgrade of one cluster, stage by stage; ok when nothing blocks it."""

    cluster_tag: str
    eks_cluster_name: str
    cluster_status: str
    current_version: str
    target_version: str
    ok: bool
    blockers: list[str]
    stages: list[str] = Field(description="control-plane → addons → hyperpod-software, in this order.")
    addons: list[AddonUpgrade]
    charts: list[ChartCheck]
    removed_apis: list[RemovedApiUse]
    hyperpod: HyperPodSoftware | None = Field(description="None when the cluster has no HyperPod cluster.")


def choose_addon_version(
    offered: list[dict[str, Any]], target: str, current: str | None, dep: Dependency | None
) -> tuple[bool, str | None]:
    """(current compatible, version to run on `target`) from DescribeAddonVersions for the target: the current
    one when offered; else the catalog's pin when offered, else the target's default version (the newest offered
    at or above the catalog's minimum when the default is below it); None when EKS offers none."""
    names = [str(v["addonVersion"]) for v in offered]
    if current in names:
        return True, current
    if dep is not None and dep.version in names:
        return False, dep.version
    default = next(
        (str(v["addonVersion"]) for v in offered for c in v.get("compatibilities") or []
         if c.get("defaultVersion") and c.get("clusterVersion") in (target, None)),
        None,
    )
    ranked = sorted(names, key=version_key, reverse=True)
    chosen = default or (ranked[0] if ranked else None)
    if chosen is not None and dep is not None and dep.min_version and version_key(chosen) < version_key(
        dep.min_version
    ):
        chosen = next((v for v in ranked if version_key(v) >= version_key(dep.min_version or "")), None)
    return False, chosen


def addon_plan(app: AppContext, row: ClusterRow, target: str) -> list[AddonUpgrade]:
    """Every installed add-on of the cluster against `target` (blocking)."""
    by_addon = {d.addon: d for d in load_catalog().dependencies if d.addon}
    out = []
    for name in sorted(eks_api.list_addons(app.aws, row.region, row.eks_cluster_name)):
        addon = eks_api.describe_addon(app.aws, row.region, row.eks_cluster_name, name) or {}
        current = addon.get("addonVersion")
        offered = eks_api.addon_versions(app.aws, row.region, name, target)
        compatible, chosen = choose_addon_version(offered, target, current, by_addon.get(name))
        action = "keep" if compatible else ("update" if chosen else "blocked")
        out.append(AddonUpgrade(name=name, status=addon.get("status"), current_version=current,
                                compatible=compatible, target_version=chosen, action=action))
    return out


async def chart_checks(
    app: AppContext, row: ClusterRow, target: str
) -> tuple[list[ChartCheck], list[tuple[str, dict[str, Any]]]]:
    """The catalog's installed helm releases against `target`, and every object of ours (release manifests,
    applied manifest sets) as (source, object) for the removed-API check."""

    async def quiet(_message: str) -> None:
        return None

    reconciler = Reconciler(app, target_of(row, None), quiet)
    checks: list[ChartCheck] = []
    objects: list[tuple[str, dict[str, Any]]] = []
    for dep in reconciler.catalog.dependencies:
        if dep.source == "manifests" and await reconciler.installed(dep):
            objects += [(f"manifests {dep.manifests}", o) for o in dependency_manifests.load_documents(dep.manifests
                                                                                                        or "")]
        if dep.source != "helm" or not dep.release:
            continue
        helm = await reconciler.helm()
        status = await blocking(helm.status, dep.release, dep.namespace)
        listed = await blocking(helm.release, dep.release, dep.namespace)
        if status is None or listed is None:
            continue
        # helm status leaves the chart out: the installed chart version is in the list entry ("<chart>-<version>"),
        # its kubeVersion in the Chart.yaml the repository serves for that version.
        chart_version = str(listed.get("chart") or "").removeprefix(f"{dep.chart}-") or dep.version
        repo = app.settings.helm_repository_url or dep.repository
        meta = await blocking(helm.show_chart, dep.chart or "", chart_version, repo)
        constraint = str(meta.get("kubeVersion") or "")
        try:
            ok = satisfies(constraint, target)
            message = f"kubeVersion {constraint!r} allows {target}" if constraint else "the chart sets no kubeVersion"
        except ValueError as exc:
            ok, message = False, f"{exc}; check the chart by hand"
        if not ok and "check the chart" not in message:
            message = f"kubeVersion {constraint!r} excludes {target}: upgrade the release to a chart that allows it"
        checks.append(ChartCheck(release=dep.release, namespace=dep.namespace, chart=str(meta.get("name") or dep.chart),
                                 chart_version=chart_version, kube_version=constraint or None, compatible=ok,
                                 message=message))
        objects += [(f"helm release {dep.release}", o) for o in yaml.safe_load_all(status.get("manifest") or "")
                    if isinstance(o, dict)]
    return checks, objects


def hyperpod_software(app: AppContext, row: ClusterRow) -> HyperPodSoftware | None:
    """The HyperPod cluster's groups and their image (blocking); None when the cluster has none."""
    name = hyperpod_cluster_name(row)
    cluster = HyperPod(app.aws, row.region).describe_cluster(name)
    if cluster is None:
        return None
    groups = [{"name": g.get("InstanceGroupName"), "currentImageReleaseVersion": g.get("CurrentImageReleaseVersion"),
               "imageVersionStatus": g.get("ImageVersionStatus")} for g in cluster.get("InstanceGroups") or []]
    return HyperPodSoftware(cluster=name, groups=groups)


def check_target(current: str, target: str) -> None:
    """The target is the cluster's version or the minor after it; InvalidInput naming the field otherwise."""
    if minor_of(target) not in (minor_of(current), minor_of(next_minor(current))):
        raise InvalidInput(
            f"Invalid input: targetVersion: EKS upgrades one minor version at a time; the cluster runs {current}, "
            f"so the target is {next_minor(current)}, not {target}.",
            hint=f"Pass targetVersion {next_minor(current)} (or leave it out), then upgrade again for the next one.",
            details={"fields": [{"field": "targetVersion", "message": f"allowed: {next_minor(current)}"}]},
        )


async def build_plan(app: AppContext, tag: str | None, target: str | None) -> UpgradePlan:
    """The upgrade plan of cluster `tag` (the active one when None) to `target` (the next minor when None)."""
    resolved = await blocking(resolve_tag, app.db, tag)
    row = await blocking(get_cluster, app.db, resolved)
    cluster = await blocking(eks_api.describe_cluster, app.aws, row.region, row.eks_cluster_name)
    if cluster is None:
        raise NotFound(f"EKS cluster {row.eks_cluster_name} of {resolved} does not exist.",
                       hint="cluster_get_status shows what the cluster has.")
    current = str(cluster["version"])
    goal = target or next_minor(current)
    check_target(current, goal)
    addons = await blocking(addon_plan, app, row, goal)
    charts, objects = await chart_checks(app, row, goal)
    findings = [RemovedApiUse(**f.__dict__) for f in removed_apis(goal, objects)]
    hyperpod = await blocking(hyperpod_software, app, row)
    blockers = [f"add-on {a.name} {a.current_version}: EKS offers no version for Kubernetes {goal}"
                for a in addons if a.action == "blocked"]
    blockers += [f"helm release {c.release} ({c.chart} {c.chart_version}): {c.message}" for c in charts
                 if not c.compatible]
    blockers += [f"{f.source}: {f.kind} {f.name} uses {f.api_version}, removed in {f.removed_in}; move it to "
                 f"{f.replacement}" for f in findings]
    if cluster.get("status") not in ("ACTIVE", "UPDATING"):
        blockers.append(f"EKS cluster {row.eks_cluster_name} is {cluster.get('status')}, not ACTIVE")
    return UpgradePlan(
        cluster_tag=resolved, eks_cluster_name=row.eks_cluster_name, cluster_status=str(cluster.get("status")),
        current_version=current, target_version=goal, ok=not blockers, blockers=blockers, stages=list(STAGES),
        addons=addons, charts=charts, removed_apis=findings, hyperpod=hyperpod,
    )


@operation("cluster_upgrade_plan", method="GET", path="/clusters/upgrade-plan", example={})
async def cluster_upgrade_plan(ctx: CallContext, req: UpgradePlanRequest) -> UpgradePlan:
    """What cluster_upgrade would do to move the cluster (clusterTag, default the active one) to the next
    Kubernetes minor version (targetVersion; EKS allows only the next one): each installed EKS add-on, whether
    its version runs on the target and the version to move to (DescribeAddonVersions); each helm release we
    installed and whether its chart's kubeVersion allows the target; objects of ours on APIs the target no
    longer serves; the HyperPod groups whose software is patched last. ok is false with blockers named.
    Changes nothing."""
    return await build_plan(ctx.app, req.cluster_tag, req.target_version)
