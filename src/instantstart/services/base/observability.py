"""The observability feature's reads shared by the domains: its AMP workspace (alias, the one cached lookup the GPU
view and the alerts use), its Grafana workspace summary, the GPU metric it scrapes and its pod-log group. The
feature itself (creating and removing them) is features/observability.py and features/grafana.py."""

from __future__ import annotations

import json
from typing import Any

from instantstart.aws import amp as amp_api
from instantstart.aws import eks as eks_api
from instantstart.aws import grafana as grafana_api
from instantstart.aws import hyperpod as hyperpod_api
from instantstart.aws.clients import AwsClients
from instantstart.context import AppContext
from instantstart.errors import InstantStartError
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of
from instantstart.services.core.ledger import TAG_CLUSTER
from instantstart.store.models import ClusterRow

ADDON = "amazon-sagemaker-hyperpod-observability"
METRIC = "DCGM_FI_DEV_GPU_UTIL"
WORKSPACE_CACHE_KEY = "amp-workspace"
GRAFANA_CACHE_KEY = "grafana-workspace"


def alias(tag: str) -> str:
    """The workspace alias InstantStart uses for a cluster."""
    return f"instantstart-{tag}"


def log_group(hyperpod_name: str, cluster_arn: str) -> str:
    """The CloudWatch group the add-on's collector ships pod logs to: /aws/sagemaker/Clusters/<name>/<id>
    (FACTS §4; the HyperPod service-linked role's log prefix)."""
    return f"/aws/sagemaker/Clusters/{hyperpod_name}/{cluster_arn.rsplit('/', 1)[-1]}"


def pod_log_group(aws: AwsClients, region: str, eks_cluster: str, hyperpod_name: str | None) -> str | None:
    """The cluster's pod-log group when the observability add-on is installed with logging on; None otherwise."""
    if not hyperpod_name:
        return None
    addon = eks_api.describe_addon(aws, region, eks_cluster, ADDON)
    if addon is None or not (json.loads(addon.get("configurationValues") or "{}").get("logging") or {}).get("enabled"):
        return None
    cluster = hyperpod_api.describe_cluster(aws, region, hyperpod_name)
    return log_group(hyperpod_name, str(cluster["ClusterArn"])) if cluster else None


def url_of(workspace: dict[str, Any]) -> str | None:
    """The workspace's sign-in URL (`https://<endpoint>`)."""
    endpoint = str(workspace.get("endpoint") or "")
    return f"https://{endpoint}" if endpoint else None


def summary(workspace: dict[str, Any] | None, created: bool) -> dict[str, Any] | None:
    """A workspace as the feature status and the monitoring links show it."""
    if workspace is None:
        return None
    return {"workspaceId": workspace.get("id"), "status": workspace.get("status"), "url": url_of(workspace),
            "name": workspace.get("name"), "createdByInstantStart": created}


def current_grafana(aws: AwsClients, region: str, tag: str, recorded: dict[str, Any] | None) -> dict[str, Any] | None:
    """The cluster's Grafana workspace now, as the cluster facts' `grafana` names it (adopted: described by id;
    ours: found again by the cluster tag); None, without an AWS call, when the feature has none."""
    known = recorded or {}
    if not known.get("workspaceId"):
        return None
    if not known.get("created"):
        return summary(grafana_api.describe_workspace(aws, region, str(known["workspaceId"])), False)
    return summary(grafana_api.find_tagged(aws, region, TAG_CLUSTER, tag), True)


async def observability_workspace(app: AppContext, row: ClusterRow) -> tuple[dict[str, Any] | None, str | None]:
    """(the cluster's AMP workspace, None) when the observability feature is on, else (None, why it is off).
    One workspace lookup per cache interval however many readers."""
    last = facts_of(row).feature_results.get("observability") or {}
    if last.get("status") == "SUCCEEDED" and not (last.get("desired") or {}).get("enabled", True):
        return None, "The observability feature was turned off (hyperpod_update_advanced_features)."

    async def fetch() -> dict[str, Any] | None:
        return await blocking(amp_api.find_workspace, app.aws, row.region, alias(row.tag))

    found: dict[str, Any] | None = await app.cache.get(f"{WORKSPACE_CACHE_KEY}:{row.region}:{row.tag}", fetch)
    turn_on = "Turn it on with hyperpod_update_advanced_features {observability: {enabled: true}}."
    if found is None:
        return None, f"The observability feature is off: no AMP workspace {alias(row.tag)}. {turn_on}"
    status = (found.get("status") or {}).get("statusCode")
    if status != "ACTIVE":
        return None, f"The AMP workspace {alias(row.tag)} is {status}. {turn_on}"
    return found, None


async def grafana_workspace(app: AppContext, row: ClusterRow) -> dict[str, Any] | None:
    """The observability feature's Grafana workspace (summary), one lookup per cache interval; None when it has
    none or it cannot be read (the console link stands in)."""

    async def fetch() -> dict[str, Any] | None:
        try:
            return await blocking(current_grafana, app.aws, row.region, row.tag, facts_of(row).grafana)
        except InstantStartError:
            return None

    found: dict[str, Any] | None = await app.cache.get(f"{GRAFANA_CACHE_KEY}:{row.region}:{row.tag}", fetch)
    return found
