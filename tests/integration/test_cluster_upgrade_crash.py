"""EKS upgrade against the twin (issue 29 item 3): the plan names each add-on whose version does not run on the next
Kubernetes minor version and the version to move to, checks the helm chart we installed; the upgrade runs
control plane → add-ons → HyperPod software, survives a kill -9 of the control plane in the middle of a stage,
and ends with the cluster on the target version, one version update, and every add-on compatible."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from instantstart.services.base.registry import get_cluster
from instantstart.store.db import Database
from instantstart.twin_process import TwinProcess
from tests.support.crash import ControlPlane, on_fresh_twin, twin_writes
from tests.support.flows import kube, make_hyperpod
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

OLD = {"kube-proxy": "v1.32.6-eksbuild.8", "coredns": "v1.11.4-eksbuild.14"}
NEW = {"kube-proxy": "v1.33.3-eksbuild.4", "coredns": "v1.12.3-eksbuild.1"}


@pytest.fixture(scope="module")
def plane(twin_process: TwinProcess) -> Iterator[ControlPlane]:
    """One control-plane process on a fresh twin (each test restarts it)."""
    cp = on_fresh_twin(twin_process, "upgrade-crash-")
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


def cluster_at_132(client: httpx.Client, twin: TwinProcess, tag: str, dependencies: bool) -> Any:
    """A 1.32 cluster with a HyperPod node, kube-proxy and CoreDNS installed a while ago at 1.32's versions."""
    make_hyperpod(client, tag)
    if dependencies:
        deps = client.post("/api/v1/clusters/dependencies", json={})
        assert wait_terminal(client, deps.json()["operationId"], timeout=240)["status"] == "SUCCEEDED"
    eks: Any = twin_client(twin, "eks")
    for name, version in OLD.items():
        eks.create_addon(clusterName=f"eks-cluster-{tag}", addonName=name, addonVersion=version)
    return eks


def compatible_on(eks: Any, cluster: str, k8s: str) -> dict[str, bool]:
    """Every add-on of the cluster: does its version run on `k8s` (DescribeAddonVersions)?"""
    out = {}
    for name in eks.list_addons(clusterName=cluster)["addons"]:
        version = eks.describe_addon(clusterName=cluster, addonName=name)["addon"]["addonVersion"]
        offered = eks.describe_addon_versions(addonName=name, kubernetesVersion=k8s)["addons"][0]["addonVersions"]
        out[name] = version in {v["addonVersion"] for v in offered}
    return out


def check_plan(client: httpx.Client) -> None:
    plan = client.get("/api/v1/clusters/upgrade-plan").json()
    assert (plan["currentVersion"], plan["targetVersion"], plan["ok"]) == ("1.32", "1.33", True), plan
    assert plan["stages"] == ["control-plane", "addons", "hyperpod-software"]
    addons = {a["name"]: a for a in plan["addons"]}
    for name, old in OLD.items():
        assert addons[name]["currentVersion"] == old and not addons[name]["compatible"]
        assert (addons[name]["action"], addons[name]["targetVersion"]) == ("update", NEW[name])
    assert addons["metrics-server"]["action"] == "keep"
    [chart] = plan["charts"]
    assert (chart["release"], chart["kubeVersion"], chart["compatible"]) == ("dependencies", ">=1.28.0-0", True)
    assert plan["removedApis"] == []
    assert plan["hyperpod"]["groups"][0]["imageVersionStatus"] == "UpdateAvailable"
    # EKS moves one minor version at a time: asking for 1.34 names the field and the allowed value.
    skipped = client.get("/api/v1/clusters/upgrade-plan", params={"targetVersion": "1.34"})
    assert skipped.status_code == 422, skipped.text
    error = skipped.json()["error"]
    assert error["code"] == "INVALID_INPUT" and "1.33" in error["hint"]
    assert error["details"]["fields"] == [{"field": "targetVersion", "message": "allowed: 1.33"}]


def moment_in(stage: str, call: str, client: httpx.Client, twin: TwinProcess, operation_id: str) -> str | None:
    """Mid-stage: `stage` runs and has made `call` (its first write)."""
    view = client.get(f"/api/v1/operations/{operation_id}").json()
    if view["status"] not in ("PENDING", "RUNNING"):
        return f"already ended ({view['status']})"
    running = next((s["name"] for s in view["stages"] if s["status"] == "RUNNING"), None)
    if running == stage and any(name.endswith("." + call) for name in twin_writes(twin)):
        return f"{stage} running after {call}"
    return None


@pytest.mark.parametrize(("stage", "call"), [("control-plane", "UpdateClusterVersion"), ("addons", "UpdateAddon")])
def test_upgrade_plan_then_kill_9_mid_stage_ends_with_every_addon_compatible(
    stage: str, call: str, plane: ControlPlane, twin_process: TwinProcess, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    twin = twin_process
    tag = f"upg-{stage[:5]}"
    cluster = f"eks-cluster-{tag}"
    running = plane.ensure_running()
    with running.client() as client:
        eks = cluster_at_132(client, twin, tag, dependencies=stage == "control-plane")
        if stage == "control-plane":
            check_plan(client)
        httpx.delete(twin.endpoint_url + "/_twin/writes").raise_for_status()
        ref = client.post("/api/v1/clusters/upgrade", json={"targetVersion": "1.33"})
        assert ref.status_code == 202, ref.text
        operation_id = ref.json()["operationId"]
        killed = plane.kill_when(lambda: moment_in(stage, call, client, twin, operation_id))
    assert "running after" in killed, killed
    with plane.start().client() as client:
        view = wait_terminal(client, operation_id, timeout=300)
    assert view["status"] == "SUCCEEDED", (killed, view)
    stages = {s["name"]: s for s in view["stages"]}
    assert stages[stage]["attempts"] >= 2, f"{stage} did not run again after the restart"
    assert eks.describe_cluster(name=cluster)["cluster"]["version"] == "1.33"
    assert get_cluster(Database(plane.database_url), tag).details["kubernetesVersion"] == "1.33"
    # The cluster's Kubernetes API server reports the new version too (helm checks kubeVersion against it).
    for key, value in twin.env.items():  # the twin's credentials sign the test's EKS token
        monkeypatch.setenv(key, value)
    assert k8s.VersionApi(kube(twin, tmp_path, tag).api_client).get_code().minor == "33"
    versions = [eks.describe_update(name=cluster, updateId=u)["update"]
                for u in eks.list_updates(name=cluster)["updateIds"]]
    assert [u["type"] for u in versions] == ["VersionUpdate"] and versions[0]["status"] == "Successful"
    assert all(compatible_on(eks, cluster, "1.33").values()), compatible_on(eks, cluster, "1.33")
    for name, new in NEW.items():
        assert eks.describe_addon(clusterName=cluster, addonName=name)["addon"]["addonVersion"] == new
        updates = eks.list_updates(name=cluster, addonName=name)["updateIds"]
        assert len(updates) == 1, f"{name} was updated {len(updates)} times ({killed})"
    assert stages["addons"]["outputs"]["versions"]["kube-proxy"] == NEW["kube-proxy"]
    sm: Any = twin_client(twin, "sagemaker")
    groups = sm.describe_cluster(ClusterName=f"hp-cluster-{tag}")["InstanceGroups"]
    assert {g["ImageVersionStatus"] for g in groups} == {"UpToDate"}
    assert sum(n for k, n in twin_writes(twin).items() if k.endswith(".UpdateClusterSoftware")) == 1
