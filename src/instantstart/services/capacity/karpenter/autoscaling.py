"""The Karpenter toggle's cluster autoscaling: UpdateCluster AutoScaling on enable, off on disable."""

from __future__ import annotations

from typing import Any

from instantstart.aws.hyperpod import HyperPod
from instantstart.context import StageContext
from instantstart.errors import ProviderError
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.facts import facts_of
from instantstart.services.base.hyperpod_groups import described
from instantstart.services.base.lifecycle import approved_scripts, verify_groups
from instantstart.services.base.registry import ClusterParams, get_cluster, hyperpod_cluster_name
from instantstart.services.capacity.karpenter.state import WAIT, record_state, state_of


async def stage_autoscaling(stage: StageContext) -> dict[str, Any]:
    """UpdateCluster: ClusterRole + AutoScaling Karpenter (unless already on), until AutoScaling is InService."""
    p = stage.params_as(ClusterParams)
    app = stage.app
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    sm = HyperPod(app.aws, p.region)
    name = hyperpod_cluster_name(row)
    cluster = await described(app, row)
    auto = cluster.get("AutoScaling") or {}
    ours = bool(state_of(row).get("autoscalingEnabled"))
    if auto.get("Mode") != "Enable":
        await blocking(verify_groups, app.aws, p.region, list(cluster.get("InstanceGroups") or []),
                       approved=approved_scripts(facts_of(row)))
        await stage.progress(f"UpdateCluster {name}: AutoScaling Karpenter")
        await blocking(
            sm.update_cluster,
            f"enable autoscaling on {name}",
            ClusterName=name,
            ClusterRole=stage.outputs["role"]["roleArn"],
            AutoScaling={"Mode": "Enable", "AutoScalerType": "Karpenter"},
        )
        ours = True
    await record_state(app, p.cluster_tag, autoscalingEnabled=ours)
    await wait_autoscaling(stage, sm, name, "Enable")
    return {"autoscaling": "Enable", "enabledHere": ours}


async def wait_autoscaling(stage: StageContext, sm: HyperPod, name: str, mode: str) -> None:
    """Until DescribeCluster's AutoScaling has `mode` and Status InService (Failed is permanent)."""

    async def ready() -> tuple[bool, str]:
        auto = (await blocking(sm.describe_cluster, name) or {}).get("AutoScaling") or {}
        if auto.get("Status") == "Failed":
            raise ProviderError(f"Autoscaling on {name} failed: {auto.get('FailureMessage', '')}", retryable=False)
        done = auto.get("Mode") == mode and auto.get("Status") == "InService"
        return done, f"autoscaling {auto.get('Mode', '-')}: {auto.get('Status', '-')}"

    await wait_until(stage, ready, limit_seconds=WAIT, what=f"autoscaling on {name}")


async def stage_remove_autoscaling(stage: StageContext) -> dict[str, Any]:
    """Disable cluster autoscaling, if the toggle enabled it."""
    p = stage.params_as(ClusterParams)
    app = stage.app
    row = await blocking(get_cluster, app.db, p.cluster_tag)
    if not state_of(row).get("autoscalingEnabled"):
        return {"autoscaling": "left as found"}
    sm = HyperPod(app.aws, p.region)
    name = hyperpod_cluster_name(row)
    auto = (await blocking(sm.describe_cluster, name) or {}).get("AutoScaling") or {}
    if auto.get("Mode") == "Enable":
        await stage.progress(f"UpdateCluster {name}: AutoScaling Disable")
        await blocking(
            sm.update_cluster,
            f"disable autoscaling on {name}",
            ClusterName=name,
            AutoScaling={"Mode": "Disable", "AutoScalerType": "Karpenter"},
        )
    await wait_autoscaling(stage, sm, name, "Disable")
    await record_state(app, p.cluster_tag, autoscalingEnabled=False)
    return {"autoscaling": "Disable"}
