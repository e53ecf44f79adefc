"""The actual state of every advanced feature, read from AWS and Kubernetes (not from what was requested)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from instantstart.aws import amp as amp_api
from instantstart.aws import hyperpod as hp_api
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext
from instantstart.errors import InstantStartError
from instantstart.kube.calls import kube_api
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of
from instantstart.services.base.observability import alias, current_grafana
from instantstart.services.base.registry import hyperpod_cluster_name as hyperpod_name
from instantstart.services.base.workload_identity import Where, identity_state
from instantstart.services.dependencies.catalog import load_catalog
from instantstart.services.dependencies.stage import live_look
from instantstart.services.features import observability as obs
from instantstart.services.features import tiered
from instantstart.services.features.specs import FEATURES, dependents, needs, owners
from instantstart.services.features.verify import kube_checks
from instantstart.store.models import ClusterRow

BUSY = ("CREATING", "UPDATING", "DELETING")


class FeatureView(WireModel):
    """One feature as the cluster has it now."""

    key: str
    title: str
    enabled: bool = Field(description="True when actually on and healthy (read from AWS/Kubernetes).")
    state: str = Field(description="ENABLED, DISABLED, IN_PROGRESS, DEGRADED, BROKEN (a link missing), FAILED or "
                       "UNKNOWN.")
    actual: dict[str, Any] = Field(description="What was read: add-on/release, CRDs, controllers, roles, IRSA chain.")
    needs: list[str]
    needed_by: list[str]
    owners: dict[str, list[str]] = Field(description="Dependency → who installed it (features or `cluster`).")
    last_result: dict[str, Any] | None = Field(description="The last request's result for this key, if any.")


async def feature_view(app: AppContext, row: ClusterRow, key: str) -> FeatureView:
    """Read one feature's actual state."""
    spec = FEATURES[key]
    where = Where(app.db, app.aws, row.tag, row.region, row.eks_cluster_name, "status")
    ledger = await blocking(owners, app.db, row.tag)
    last = facts_of(row).feature_results.get(key)
    actual: dict[str, Any] = {}
    try:
        if key == "tieredStorage":
            cluster = await blocking(hp_api.describe_cluster, app.aws, row.region, hyperpod_name(row))
            api = await blocking(kube_api, app.kube, row.eks_cluster_name, row.region)
            actual = await blocking(tiered.chain, where, api, cluster, facts_of(row).bucket,
                                    tiered.subject_of(facts_of(row).checkpointing))
            enabled, state = actual["enabled"], actual["state"]
        else:
            assert spec.primary is not None
            look = await live_look(app, row, load_catalog().get(spec.primary))
            actual["dependency"] = {"name": spec.primary, **look}
            status = str(look.get("status"))
            if status in ("NOT_INSTALLED", "uninstalled"):
                enabled, state = False, "DISABLED"
            elif status in BUSY or status.startswith("pending"):
                enabled, state = False, "IN_PROGRESS"
            elif status in ("ACTIVE", "deployed"):
                checks = await blocking(kube_checks, app, row, key)
                actual.update(checks)
                enabled = bool(checks["ready"])
                state = "ENABLED" if enabled else "DEGRADED"
            elif status == "UNKNOWN":
                enabled, state = False, "UNKNOWN"
            else:
                enabled, state = False, "DEGRADED" if status == "DEGRADED" else "FAILED"
            if spec.identity is not None:
                actual["identity"] = await blocking(identity_state, where, spec.identity)
            if key == "observability":
                workspace = await blocking(amp_api.find_workspace, app.aws, row.region, alias(row.tag))
                actual["workspace"] = obs.urls(workspace) if workspace else None
                try:
                    recorded = facts_of(row).grafana
                    actual["grafana"] = await blocking(current_grafana, app.aws, row.region, row.tag, recorded)
                except InstantStartError as exc:  # the metrics path is fine without it: not the feature's state
                    actual["grafana"] = {"error": exc.message, "hint": exc.hint}
    except InstantStartError as exc:
        enabled, state = False, "UNKNOWN"
        actual = {**actual, "error": exc.message, "hint": exc.hint}
    mine = {d: o for d, o in ledger.items() if key in o or d == spec.primary}
    return FeatureView(key=key, title=spec.title, enabled=enabled, state=state, actual=actual, needs=needs(key),
                       needed_by=dependents(key), owners=mine, last_result=last)
