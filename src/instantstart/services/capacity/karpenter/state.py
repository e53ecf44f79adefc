"""What the Karpenter toggle stores: its operations' params and the state recorded on the cluster row."""

from __future__ import annotations

from typing import Any, Literal

from instantstart.context import AppContext
from instantstart.manifests import karpenter as karpenter_manifests
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of
from instantstart.services.base.registry import ClusterParams, get_cluster, record_facts
from instantstart.store.models import ClusterRow

WAIT = 1800


class KarpenterSettingsParams(ParamsModel):
    """The NodePool decisions, as stored under `settings` (and recorded on the cluster row once enabled)."""

    instance_groups: list[str]
    instance_types: list[str] = []
    consolidation_policy: Literal["WhenEmptyOrUnderutilized", "WhenEmpty"] = "WhenEmptyOrUnderutilized"
    consolidate_after: str = "60s"
    budget_nodes: str = "10%"
    gpu_limit: int | None = None

    def manifest_settings(self) -> karpenter_manifests.KarpenterSettings:
        """The manifests' KarpenterSettings (empty instance types dropped)."""
        return karpenter_manifests.KarpenterSettings(
            instance_groups=tuple(self.instance_groups),
            instance_types=tuple(t for t in self.instance_types if t),
            consolidation_policy=self.consolidation_policy,
            consolidate_after=self.consolidate_after,
            budget_nodes=self.budget_nodes,
            gpu_limit=self.gpu_limit,
        )


class KarpenterEnableParams(ClusterParams):
    """Params of karpenter_enable: the cluster and the validated NodePool decisions."""

    settings: KarpenterSettingsParams


def state_of(row: ClusterRow) -> dict[str, Any]:
    """What the toggle recorded on the cluster row."""
    return dict(facts_of(row).karpenter)


async def record_state(app: AppContext, tag: str, **values: Any) -> None:
    """Merge into the recorded Karpenter state."""
    row = await blocking(get_cluster, app.db, tag)
    await blocking(record_facts, app.db, tag, karpenter={**state_of(row), **values})
