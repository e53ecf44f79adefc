"""Node operations against the twin: reboot and replace move a node through HyperPod's states and its
Kubernetes Node follows; delete lowers the group; software update; EKS managed node groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import until, wait_terminal


def ready_since(core: k8s.CoreV1Api, name: str) -> Any:
    """The Ready condition of a Node (status and when it last changed)."""
    node = core.read_node(name)
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    return ready.status, ready.last_transition_time


def node_names(core: k8s.CoreV1Api) -> set[str]:
    """Names of the cluster's Kubernetes Nodes."""
    return {n.metadata.name for n in core.list_node().items}


def test_reboot_replace_delete_and_software(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    sm: Any = twin_client(twin, "sagemaker")
    with cp.client() as client:
        make_hyperpod(client, "nd1", acceleratedInstanceCount=3)
    core = kube(twin, tmp_path, "nd1")
    nodes = sm.list_cluster_nodes(ClusterName="hp-cluster-nd1")["ClusterNodeSummaries"]
    ids = sorted(n["InstanceId"] for n in nodes)
    assert len(ids) == 3 and node_names(core) >= {f"hyperpod-{i}" for i in ids}
    first, second, third = ids
    status, since = ready_since(core, f"hyperpod-{first}")
    assert status == "True"

    # Reboot by Kubernetes Node name, through MCP: Pending ("Rebooting") and NotReady, then Running and Ready.
    [ref] = mcp_calls(cp, [("hyperpod_node_reboot", {"nodeId": f"hyperpod-{first}"})])
    assert ref["statusTool"] == "operation_get"
    rebooted = mcp_wait(cp, ref["operationId"])
    assert rebooted["status"] == "SUCCEEDED", rebooted
    assert sm.describe_cluster_node(ClusterName="hp-cluster-nd1", NodeId=first)["NodeDetails"]["InstanceStatus"][
        "Status"] == "Running"
    events = sm.list_cluster_events(ClusterName="hp-cluster-nd1", NodeId=first)["Events"]
    assert any(e["Description"] == f"Rebooting {first}" for e in events)
    status, after = ready_since(core, f"hyperpod-{first}")
    assert status == "True" and after > since  # the Node went NotReady and came back

    # Replace by instance id through REST: the old instance and Node go, a new one is Running and Ready.
    with cp.client() as client:
        ref = client.post("/api/v1/capacity/nodes/replace", json={"nodeId": second})
        assert ref.status_code == 202, ref.text
        view = wait_terminal(client, ref.json()["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED", view
        outputs = view["stages"][1]["outputs"]
        fresh = outputs["newNodeId"]
        assert fresh not in ids and "volumes" in outputs["note"]
        names = node_names(core)
        assert f"hyperpod-{second}" not in names and f"hyperpod-{fresh}" in names
        assert ready_since(core, f"hyperpod-{fresh}")[0] == "True"
        listed = {n["InstanceId"] for n in sm.list_cluster_nodes(ClusterName="hp-cluster-nd1")["ClusterNodeSummaries"]}
        assert listed == {first, third, fresh}

        # Delete: the node and its Node go, and the group's target drops so nothing replaces it.
        body = {"nodeId": f"hyperpod-{third}", "clientToken": "delete-third"}
        ref = client.post("/api/v1/capacity/nodes/delete", json=body)
        assert wait_terminal(client, ref.json()["operationId"], timeout=120)["status"] == "SUCCEEDED"
        # A retry with the same clientToken returns the same operation, although the node is gone now.
        again = client.post("/api/v1/capacity/nodes/delete", json=body)
        assert again.status_code == 202 and again.json()["operationId"] == ref.json()["operationId"], again.text
        group = sm.describe_cluster(ClusterName="hp-cluster-nd1")["InstanceGroups"][0]
        assert (group["TargetCount"], group["CurrentCount"]) == (2, 2)
        assert f"hyperpod-{third}" not in node_names(core)

        # Unknown and malformed ids are refused up front.
        unknown = client.post("/api/v1/capacity/nodes/reboot", json={"nodeId": "i-0000000000000000a"})
        assert unknown.status_code == 404 and "nodeId" in unknown.json()["error"]["message"]
        bad = client.post("/api/v1/capacity/nodes/reboot", json={"nodeId": "node-1"})
        assert bad.status_code == 422

        # Software update: every group goes through SystemUpdating to the latest release.
        ref = client.post("/api/v1/capacity/software-update", json={})
        assert ref.status_code == 202, ref.text
        view = wait_terminal(client, ref.json()["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED", view
    group = sm.describe_cluster(ClusterName="hp-cluster-nd1")["InstanceGroups"][0]
    assert group["SoftwareUpdateStatus"] == "Succeeded" and group["ImageVersionStatus"] == "UpToDate"


def test_eks_managed_node_groups(cp: Running, twin: TwinProcess) -> None:
    eks: Any = twin_client(twin, "eks")
    with cp.client() as client:
        make_hyperpod(client, "ng1")
        cluster = eks.describe_cluster(name="eks-cluster-ng1")["cluster"]
        iam: Any = twin_client(twin, "iam")
        role = iam.create_role(RoleName="ng1-nodes", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        eks.create_nodegroup(
            clusterName="eks-cluster-ng1", nodegroupName="system", nodeRole=role, instanceTypes=["m5.xlarge"],
            subnets=cluster["resourcesVpcConfig"]["subnetIds"],
            scalingConfig={"minSize": 1, "maxSize": 2, "desiredSize": 1},
        )
        listing = client.get("/api/v1/capacity/instance-groups").json()
        assert [g["name"] for g in listing["nodeGroups"]] == ["system"]
        bad = client.post("/api/v1/capacity/nodegroups/scale",
                          json={"name": "system", "minSize": 3, "maxSize": 4, "desiredSize": 1})
        assert bad.status_code == 422 and "desiredSize" in bad.json()["error"]["message"], bad.text
        ref = client.post("/api/v1/capacity/nodegroups/scale",
                          json={"name": "system", "minSize": 1, "maxSize": 4, "desiredSize": 3})
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"], timeout=60)["status"] == "SUCCEEDED"
        scaling = eks.describe_nodegroup(clusterName="eks-cluster-ng1", nodegroupName="system")["nodegroup"][
            "scalingConfig"]
        assert scaling == {"minSize": 1, "maxSize": 4, "desiredSize": 3}
    [ref] = mcp_calls(cp, [("cluster_nodegroup_delete", {"nodeGroupName": "system"})])
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    assert eks.list_nodegroups(clusterName="eks-cluster-ng1")["nodegroups"] == []


def test_node_health_as_kubernetes_sees_it_then_automatic_recovery(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    sm: Any = twin_client(twin, "sagemaker")
    with cp.client() as client:
        make_hyperpod(client, "nh1")
    [node] = sm.list_cluster_nodes(ClusterName="hp-cluster-nh1")["ClusterNodeSummaries"]
    sick = node["InstanceId"]
    # Hold the twin clock (60 twin seconds take ~17 hours at this scale) so the finding stays visible however
    # loaded the machine: NodeRecovery acts 60 twin seconds after it. At scale 2 the replacement could start
    # while a slow MCP session was still opening.
    httpx.post(twin.endpoint_url + "/_twin/clock", json={"scale": 0.001}).raise_for_status()
    try:
        httpx.post(twin.endpoint_url + f"/_twin/nodes/{sick}/health",
                   json={"status": "UnschedulablePendingReplacement", "reason": "NvidiaGpuXidError"}).raise_for_status()
        core = kube(twin, tmp_path, "nh1")
        labels = core.read_node(f"hyperpod-{sick}").metadata.labels
        assert labels["sagemaker.amazonaws.com/node-health-status"] == "UnschedulablePendingReplacement", labels
        seen: dict[str, Any] = {}

        def status_shows_the_finding() -> bool:
            # cluster_get_status serves the Kubernetes side from the control plane's watches (and memoizes it):
            # that view converges after the API server's, so wait on it, not on the label read above.
            [status] = mcp_calls(cp, [("cluster_get_status", {})])
            seen.clear()
            seen.update(next((n for n in status["nodes"] if n["name"] == f"hyperpod-{sick}"), {}))
            return bool(seen.get("healthStatus") == "UnschedulablePendingReplacement" and seen.get("faultReasons"))

        until(status_shows_the_finding, "cluster_get_status to show the health finding", timeout=120, every=0.5)
        view = seen
        assert view["healthStatus"] == "UnschedulablePendingReplacement" and view["schedulable"] is False, view
        assert view["faultReasons"] and "Xid" in view["faultReasons"], view
        assert "sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule" in view["taints"], view
    finally:
        httpx.post(twin.endpoint_url + "/_twin/clock", json={"scale": 500}).raise_for_status()
    # NodeRecovery stays Automatic: HyperPod replaces the node and the group is whole again.
    def replaced() -> list[dict[str, Any]] | None:
        listed: list[dict[str, Any]] = sm.list_cluster_nodes(ClusterName="hp-cluster-nh1")["ClusterNodeSummaries"]
        done = [(n["InstanceId"] != sick, n["InstanceStatus"]["Status"]) for n in listed] == [(True, "Running")]
        return listed if done else None

    nodes = until(replaced, "HyperPod to replace the sick node", timeout=120, every=0.2)
    assert sick not in {n["InstanceId"] for n in nodes} and len(nodes) == 1, nodes
