"""Managed Karpenter against the twin: refusals with reasons, a pending GPU pod scales the group up, idle
capacity consolidates down, and disabling leaves nothing the toggle created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from instantstart.errors import InvalidInput, PreconditionFailed
from instantstart.services.capacity.karpenter.toggle import eligible
from instantstart.twin_process import TwinProcess
from tests.support.flows import add_group, kube, make_hyperpod, mcp_calls
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import until, wait_terminal


def status(client: Any) -> dict[str, Any]:
    """karpenter_get_status through REST."""
    response = client.get("/api/v1/capacity/karpenter-status")
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload


def test_eligibility_refuses_with_reasons() -> None:
    group = {"InstanceGroupName": "a", "InstanceType": "ml.g6.12xlarge", "TargetCount": 0}
    classic = {"ClusterName": "hp", "InstanceGroups": [group]}
    with pytest.raises(PreconditionFailed, match="continuous provisioning"):
        eligible(classic, None)
    continuous = {**classic, "NodeProvisioningMode": "Continuous"}
    assert eligible(continuous, None) == (["a"], ["ml.g6.12xlarge"])
    for change, reason in (({"TrainingPlanArn": "arn:x"}, "training plan"),
                           ({"OnStartDeepHealthChecks": ["InstanceStress"]}, "deep health checks"),
                           ({"TargetCount": 2}, "start at 0")):
        bad = {**continuous, "InstanceGroups": [{**group, **change}]}
        with pytest.raises(InvalidInput, match=reason):
            eligible(bad, ["a"])
        with pytest.raises(PreconditionFailed, match="No instance group"):
            eligible(bad, None)
    with pytest.raises(InvalidInput, match="not an instance group"):
        eligible(continuous, ["b"])
    # A group Karpenter already manages may have nodes when the toggle is applied again.
    busy = {**continuous, "InstanceGroups": [{**group, "TargetCount": 3}]}
    assert eligible(busy, ["a"], frozenset({"a"})) == (["a"], ["ml.g6.12xlarge"])


def test_karpenter_scales_up_consolidates_and_uninstalls_cleanly(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    sm: Any = twin_client(twin, "sagemaker")
    iam: Any = twin_client(twin, "iam")
    with cp.client() as client:
        make_hyperpod(client, "kp1")
        assert status(client)["state"] == "NOT_STARTED"
        auto = add_group(client, instanceGroupName="auto-a", instanceType="ml.g6.12xlarge", instanceCount=0,
                         availabilityZone="us-west-2c")
        assert auto["status"] == "SUCCEEDED", auto
        busy = client.post("/api/v1/capacity/karpenter", json={"instanceGroups": ["accelerated-kp1"]})
        assert busy.status_code == 422 and "start at 0" in busy.json()["error"]["message"], busy.text

    # Enable through MCP, as an agent would; karpenter_get_status decides completion.
    [ref] = mcp_calls(cp, [("karpenter_install", {"instanceGroups": ["auto-a"], "consolidateAfter": "30s"})])
    assert ref["statusTool"] == "karpenter_get_status"
    with cp.client() as client:
        enabled = until(lambda: (s := status(client))["terminal"] and s, timeout=120, what="karpenter enabled")
        assert enabled["state"] == "ENABLED" and enabled["enabled"], enabled
        assert enabled["nodePool"]["ready"] is True and enabled["nodeClass"]["ready"] is True
        pool = enabled["nodePool"]["spec"]
        assert pool["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s",
                                      "budgets": [{"nodes": "10%"}]}
        assert pool["template"]["spec"]["nodeClassRef"]["kind"] == "HyperpodNodeClass"
        assert enabled["nodeClass"]["spec"] == {"instanceGroups": ["auto-a"]}
        groups = {g["name"]: g for g in client.get("/api/v1/capacity/instance-groups").json()["instanceGroups"]}
        assert groups["auto-a"]["karpenterManaged"] and not groups["accelerated-kp1"]["karpenterManaged"]
        manual = client.post("/api/v1/capacity/instance-groups/scale", json={"name": "auto-a", "targetCount": 1})
        assert manual.status_code == 412, manual.text
    cluster = sm.describe_cluster(ClusterName="hp-cluster-kp1")
    assert cluster["AutoScaling"]["Mode"] == "Enable" and cluster["AutoScaling"]["Status"] == "InService"
    assert cluster["NodeRecovery"] == "Automatic"
    role = iam.get_role(RoleName="instantstart-kp1-hp-autoscaling")["Role"]
    assert cluster["ClusterRole"] == role["Arn"]

    # A pending GPU pod (4 GPUs: only an ml.g6.12xlarge fits) makes the twin's group scale up.
    core = kube(twin, tmp_path, "kp1")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer"},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                                    "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
    core.create_namespaced_pod("default", pod)

    def group(name: str) -> dict[str, Any]:
        found: dict[str, Any] = next(
            g for g in sm.describe_cluster(ClusterName="hp-cluster-kp1")["InstanceGroups"]
            if g["InstanceGroupName"] == name)
        return found

    until(lambda: group("auto-a")["CurrentCount"] == 1, timeout=90, what="scale-up")
    bound = until(lambda: core.read_namespaced_pod("trainer", "default").spec.node_name, what="pod bound")
    node = core.read_node(bound)
    assert node.metadata.labels["sagemaker.amazonaws.com/instance-group-name"] == "auto-a"
    assert node.metadata.labels["karpenter.sh/nodepool"] == "instantstart"

    # Idle: the node is consolidated away and the group goes back to zero.
    core.delete_namespaced_pod("trainer", "default", grace_period_seconds=0)
    until(lambda: group("auto-a")["TargetCount"] == 0 and group("auto-a")["CurrentCount"] == 0,
          timeout=90, what="consolidation")
    until(lambda: bound not in {n.metadata.name for n in core.list_node().items}, what="node removed")
    assert group("accelerated-kp1")["CurrentCount"] == 1  # the unmanaged group is untouched

    # Karpenter off: exactly what it created is gone, in reverse order.
    with cp.client() as client:
        off = client.post("/api/v1/capacity/karpenter/uninstall", json={})
        assert off.status_code == 202, off.text
        view = wait_terminal(client, off.json()["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED", view
        assert [s["name"] for s in view["stages"]] == ["nodepool", "autoscaling", "role"]
        final = status(client)
        assert final["state"] == "DISABLED" and final["enabled"] is False and final["nodePool"] is None
        groups = {g["name"]: g for g in client.get("/api/v1/capacity/instance-groups").json()["instanceGroups"]}
        assert not groups["auto-a"]["karpenterManaged"]
    custom = k8s.CustomObjectsApi(core.api_client)
    for group_name, plural in (("karpenter.sh", "nodepools"), ("karpenter.sagemaker.amazonaws.com",
                                                               "hyperpodnodeclasses")):
        assert custom.list_cluster_custom_object(group_name, "v1", plural)["items"] == []
    assert sm.describe_cluster(ClusterName="hp-cluster-kp1")["AutoScaling"]["Mode"] == "Disable"
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_role(RoleName="instantstart-kp1-hp-autoscaling")
    assert sm.describe_cluster(ClusterName="hp-cluster-kp1")["NodeRecovery"] == "Automatic"


def test_karpenter_key_of_the_advanced_features(cp: Running, twin: TwinProcess) -> None:
    sm: Any = twin_client(twin, "sagemaker")
    with cp.client() as client:
        make_hyperpod(client, "kp2")
        empty = client.post("/api/v1/capacity/advanced-features", json={})
        assert empty.status_code == 422 and "karpenter" in empty.json()["error"]["message"]
        # Off while it was never on: an explicit diff with nothing to remove.
        off = client.post("/api/v1/capacity/advanced-features", json={"karpenter": {"enabled": False}})
        assert off.status_code == 202 and off.json()["statusTool"] == "hyperpod_get_advanced_features", off.text
        assert wait_terminal(client, off.json()["operationId"], timeout=60)["status"] == "SUCCEEDED"
        # On with no group at count 0: refused with the reason.
        refused = client.post("/api/v1/capacity/advanced-features", json={"karpenter": {"enabled": True}})
        assert refused.status_code == 412 and "No instance group" in refused.json()["error"]["message"]
        assert add_group(client, instanceGroupName="auto-b", instanceType="ml.g6.12xlarge", instanceCount=0,
                         availabilityZone="us-west-2c")["status"] == "SUCCEEDED"
    [on] = mcp_calls(cp, [("hyperpod_update_advanced_features",
                           {"karpenter": {"enabled": True, "consolidationPolicy": "WhenEmpty"}})])
    with cp.client() as client:
        assert wait_terminal(client, on["operationId"], timeout=120)["status"] == "SUCCEEDED"
        features = client.get("/api/v1/capacity/advanced-features").json()
        karpenter = features["karpenter"]
        assert karpenter["state"] == "ENABLED" and karpenter["settings"]["instanceGroups"] == ["auto-b"]
        assert karpenter["nodePool"]["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
        off = client.post("/api/v1/capacity/advanced-features", json={"karpenter": {"enabled": False}})
        assert wait_terminal(client, off.json()["operationId"], timeout=120)["status"] == "SUCCEEDED"
        assert client.get("/api/v1/capacity/advanced-features").json()["karpenter"]["state"] == "DISABLED"
    assert sm.describe_cluster(ClusterName="hp-cluster-kp2")["AutoScaling"]["Mode"] == "Disable"
