"""Typed params of the capacity, feature and registry kinds: what earlier versions stored still loads unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from instantstart.errors import InvalidInput
from instantstart.operations.kinds import KINDS, OpenParams
from instantstart.operations.params import params_for_load, params_for_submit, params_to_store
from instantstart.services import load_all

load_all()

WHERE = {"clusterTag": "demo", "region": "us-west-2"}
GROUP = {
    "name": "gpu-b",
    "instanceType": "ml.p5.48xlarge",
    "count": 2,
    "availabilityZone": "us-west-2c",
    "ebsGb": 500,
    "trainingPlanArn": None,
    "capacityType": "Spot",
    "efaOnly": True,
    "newSubnet": True,
    "subnetId": None,
    "threadsPerCore": 2,
    "deepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
    "notes": ["Spot capacity can be reclaimed at short notice."],
}
SETTINGS = {
    "instanceGroups": ["auto-a"],
    "instanceTypes": ["ml.g6.4xlarge"],
    "consolidationPolicy": "WhenEmpty",
    "consolidateAfter": "60s",
    "budgetNodes": "10%",
    "gpuLimit": 8,
}
# The params each kind's service submitted before the kinds were typed, key for key.
STORED: dict[str, dict[str, Any]] = {
    "instance_group_add": {**WHERE, "group": GROUP},
    "instance_group_scale": {**WHERE, "name": "gpu-b", "targetCount": 3},
    "instance_group_delete": {**WHERE, "name": "gpu-b"},
    "node_reboot": {**WHERE, "nodeId": "i-0123456789abcdef0", "action": "reboot"},
    "node_replace": {**WHERE, "nodeId": "i-0123456789abcdef0", "action": "replace"},
    "node_delete": {**WHERE, "nodeId": "i-0123456789abcdef0", "action": "delete"},
    "hyperpod_software_update": {
        **WHERE,
        "instanceGroups": [{"InstanceGroupName": "gpu-b", "ImageReleaseVersion": "2026.01.15"}],
        "deploymentConfig": {
            "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "CAPACITY_PERCENTAGE", "Value": 34}},
            "WaitIntervalInSeconds": 60,
            "AutoRollbackConfiguration": [{"AlarmName": "gpu-xid-errors"}],
        },
    },
    "nodegroup_scale": {
        **WHERE,
        "eksCluster": "eks-demo",
        "name": "system",
        "scaling": {"minSize": 1, "maxSize": 3, "desiredSize": 2},
    },
    "nodegroup_delete": {**WHERE, "eksCluster": "eks-demo", "name": "system"},
    "karpenter_enable": {**WHERE, "settings": SETTINGS},
    "karpenter_disable": dict(WHERE),
    "cluster_switch": {"clusterTag": "demo"},
}


@pytest.mark.parametrize("kind", sorted(STORED))
def test_stored_params_load_and_round_trip(kind: str) -> None:
    registered = KINDS.get(kind)
    assert registered is not None
    assert registered.params is not OpenParams, f"{kind} declares no params model"
    loaded = params_for_load(registered.params, kind, "op-0001", STORED[kind])
    assert loaded.model_dump(mode="json", by_alias=True) == STORED[kind]
    submitted = params_for_submit(registered.params, kind, STORED[kind])
    assert params_to_store(registered.params, kind, submitted) == STORED[kind]


@pytest.mark.parametrize("kind", sorted(STORED))
def test_unknown_or_missing_keys_are_refused(kind: str) -> None:
    registered = KINDS.get(kind)
    assert registered is not None
    with pytest.raises(InvalidInput, match="surprise"):
        params_for_load(registered.params, kind, "op-0001", {**STORED[kind], "surprise": 1})
    with pytest.raises(InvalidInput, match="clusterTag"):
        missing = {k: v for k, v in STORED[kind].items() if k != "clusterTag"}
        params_for_load(registered.params, kind, "op-0001", missing)


def test_nested_values_are_typed() -> None:
    add = KINDS.get("instance_group_add")
    assert add is not None
    bad = {**WHERE, "group": {**GROUP, "capacityType": "Reserved"}}
    with pytest.raises(InvalidInput, match=r"group\.capacityType"):
        params_for_load(add.params, "instance_group_add", "op-0001", bad)
    node = KINDS.get("node_reboot")
    assert node is not None
    with pytest.raises(InvalidInput, match="action"):
        params_for_load(node.params, "node_reboot", "op-0001", {**STORED["node_reboot"], "action": "shutdown"})


def test_submit_stores_the_kinds_own_model_and_refuses_another() -> None:
    registered = KINDS.get("node_reboot")
    other = KINDS.get("instance_group_add")
    assert registered is not None and other is not None
    model = params_for_load(registered.params, "node_reboot", "op-0001", STORED["node_reboot"])
    assert params_to_store(registered.params, "node_reboot", model) == STORED["node_reboot"]
    foreign = params_for_load(other.params, "instance_group_add", "op-0001", STORED["instance_group_add"])
    with pytest.raises(InvalidInput, match=r"node_reboot are a \w+, not its \w+"):
        params_to_store(registered.params, "node_reboot", foreign)


def test_a_software_update_stored_before_deployment_configs_still_loads() -> None:
    """Stored before DeploymentConfig existed: only the cluster; loads as every group, all at once."""
    registered = KINDS.get("hyperpod_software_update")
    assert registered is not None
    loaded = params_for_load(registered.params, "hyperpod_software_update", "op-0001", dict(WHERE))
    assert loaded.model_dump(mode="json", by_alias=True) == {**WHERE, "instanceGroups": None, "deploymentConfig": None}
