"""The `karpenter` key inside an advanced-features request: the Karpenter toggle's steps as one feature stage."""

from __future__ import annotations

import dataclasses
from typing import Any

from instantstart.context import AppContext, StageContext
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking
from instantstart.services.base.registry import ClusterParams, get_cluster
from instantstart.services.capacity.karpenter.state import KarpenterEnableParams, KarpenterSettingsParams, state_of
from instantstart.services.capacity.karpenter.toggle import DISABLE_STAGES, ENABLE_STAGES
from instantstart.store.models import ClusterRow

KEY = "karpenter"


async def run_karpenter(app: AppContext, stage: StageContext, row: ClusterRow,
                        settings: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Enable (role, cluster autoscaling, NodePool) or disable (the reverse) with the validated settings the
    request stored; every step looks first, so a rerun after a restart repeats no write. (action, actual)."""
    before = state_of(row)
    params: ParamsModel
    if settings.get("enabled"):
        wanted = KarpenterSettingsParams.model_validate(settings["settings"])
        params = KarpenterEnableParams(cluster_tag=row.tag, region=row.region, settings=wanted)
        steps = ENABLE_STAGES
        same = bool(before.get("enabled")) and before.get("settings") == _stored(wanted)
    else:
        params = ClusterParams(cluster_tag=row.tag, region=row.region)
        steps = DISABLE_STAGES
        same = not before.get("enabled") and not before.get("roleName")
    outputs: dict[str, dict[str, Any]] = {}
    for step in steps:
        await stage.progress(f"karpenter: {step.name}")
        sub = dataclasses.replace(stage, params=params, outputs=outputs, stage=f"{KEY}.{step.name}")
        outputs[step.name] = dict(await step.fn(sub) or {})
    after = state_of(await blocking(get_cluster, app.db, row.tag))
    action = "unchanged" if same else ("enabled" if settings.get("enabled") else "disabled")
    return action, {"steps": outputs, "enabled": bool(after.get("enabled")), "settings": after.get("settings"),
                    "instanceGroups": after.get("instanceGroups")}


def _stored(wanted: KarpenterSettingsParams) -> dict[str, Any]:
    return wanted.model_dump(mode="json", by_alias=True)
