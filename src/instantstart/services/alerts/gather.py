"""What the alert rules read beyond the timeline and the watches: lifecycle scripts (S3), GPU utilisation (the
observability add-on's AMP workspace, PromQL over DCGM) and Kueue Workloads (task governance). Network reads only;
no database session is held."""

from __future__ import annotations

import logging
from typing import Any

from anyio import to_thread

from instantstart.aws import amp_query
from instantstart.aws import hyperpod as hp_api
from instantstart.context import AppContext
from instantstart.errors import NotFound
from instantstart.kube.calls import kube_api
from instantstart.services.base.facts import facts_of
from instantstart.services.base.lifecycle import approved_scripts, lifecycle_problems
from instantstart.services.base.observability import METRIC, observability_workspace
from instantstart.services.base.registry import hyperpod_cluster_name
from instantstart.services.teams.queueing import list_workloads
from instantstart.store.models import ClusterRow

log = logging.getLogger(__name__)


async def lifecycle(app: AppContext, row: ClusterRow) -> list[str] | None:
    """The cluster's own lifecycle scripts that are not InstantStart's (cluster_get_status's check); none when the
    cluster has no HyperPod cluster of ours; None when it cannot be read now (unknown, not "changed")."""
    bucket = facts_of(row).bucket
    if not bucket or not row.hyperpod_cluster_name:
        return []
    name = hyperpod_cluster_name(row)

    def check() -> list[str]:
        hp = hp_api.describe_cluster(app.aws, row.region, name) or {}
        return lifecycle_problems(app.aws, row.region, bucket, row.tag, list(hp.get("InstanceGroups") or []),
                                  approved=approved_scripts(facts_of(row)))

    try:
        return await to_thread.run_sync(check)
    except Exception as exc:
        log.info("alerts: lifecycle scripts of %s not checked: %s", row.tag, exc)
        return None


async def gpu_utilisation(app: AppContext, row: ClusterRow, nodes: list[str]) -> dict[str, float] | None:
    """Mean DCGM utilisation (%) now of each of `nodes` (those with GPUs allocated to pods); None (unknown) when
    the observability feature is off or its workspace cannot be read."""
    if not nodes:
        return {}
    workspace, _off = await observability_workspace(app, row)
    if workspace is None:
        return None

    def read() -> dict[str, Any]:
        base = amp_query.workspace_url(app.aws, row.region, str(workspace["workspaceId"]),
                                       workspace.get("prometheusEndpoint"))
        return amp_query.query(app.aws, row.region, base, "query", {"query": f"avg by (Hostname) ({METRIC})"})

    try:
        data = await to_thread.run_sync(read)
    except Exception as exc:
        log.info("alerts: GPU utilisation of %s not read: %s", row.tag, exc)
        return None
    means = {str((r.get("metric") or {}).get("Hostname")): float(r["value"][1]) for r in data.get("result") or []}
    return {n: means[n] for n in nodes if n in means}


async def kueue_workloads(app: AppContext, row: ClusterRow) -> list[dict[str, Any]] | None:
    """The Kueue Workloads of every namespace ([] when Kueue is not installed: the cluster has no Workload kind);
    None when they cannot be read now (unknown, not "none pending")."""

    def read() -> list[dict[str, Any]]:
        return list_workloads(kube_api(app.kube, row.eks_cluster_name, row.region), None)

    try:
        return await to_thread.run_sync(read)
    except NotFound:
        return []
    except Exception as exc:
        log.info("alerts: Kueue workloads of %s not read: %s", row.tag, exc)
        return None
