"""A rolling hyperpod_update_software survives a kill -9 of the control plane mid-rollout (issue 29): the process
dies while batch 1 of 3 updates, the rollout goes on in HyperPod meanwhile, and the restarted process resumes the
update stage without a second UpdateClusterSoftware call and reports every node on the new release."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from instantstart.twin_process import TwinProcess
from tests.support.crash import ControlPlane, on_fresh_twin, twin_writes
from tests.support.flows import make_hyperpod
from tests.support.servers import SSL_CONTEXT
from tests.support.twin import TWIN_CLOCK_SCALE, twin_client
from tests.support.waits import wait_terminal

TAG = "swcrash"
CLUSTER = f"hp-cluster-{TAG}"
BATCH = 600  # the twin's seconds per batch (hyperpod_timings.SOFTWARE_UPDATE)


def clock(twin: TwinProcess, **body: float) -> None:
    httpx.post(twin.endpoint_url + "/_twin/clock", json=body, timeout=30, verify=SSL_CONTEXT).raise_for_status()


@pytest.fixture(scope="module")
def plane(twin_process: TwinProcess) -> Iterator[ControlPlane]:
    """One control-plane process on a fresh twin; the twin clock at its usual speed afterwards."""
    cp = on_fresh_twin(twin_process, "software-crash-")
    cp.start()
    try:
        yield cp
    finally:
        clock(twin_process, scale=TWIN_CLOCK_SCALE)
        cp.stop()


def updating(sm: Any) -> list[str]:
    return sorted(n["InstanceId"] for n in sm.list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]
                  if n["InstanceStatus"]["Status"] == "SystemUpdating")


def test_kill_9_mid_rollout_resumes_without_a_second_update_call(
    plane: ControlPlane, twin_process: TwinProcess
) -> None:
    twin = twin_process
    sm: Any = twin_client(twin, "sagemaker")
    running = plane.ensure_running()
    with running.client() as client:
        make_hyperpod(client, TAG, acceleratedInstanceCount=3)
        before = {n["InstanceId"] for n in sm.list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]}
        clock(twin, scale=0.001)  # twin time held: the test moves it
        httpx.delete(twin.endpoint_url + "/_twin/writes", verify=SSL_CONTEXT).raise_for_status()
        ref = client.post("/api/v1/capacity/software-update", json={"deploymentConfig": {
            "rollingUpdatePolicy": {"maximumBatchSize": {"type": "INSTANCE_COUNT", "value": 1}},
            "waitIntervalInSeconds": 0}})
        assert ref.status_code == 202, ref.text
        operation_id = ref.json()["operationId"]
        first: list[str] = []

        def calls() -> int:
            return sum(n for k, n in twin_writes(twin).items() if k.endswith(".UpdateClusterSoftware"))

        def mid_rollout() -> str | None:
            view = client.get(f"/api/v1/operations/{operation_id}").json()
            stage = next((s["name"] for s in view["stages"] if s["status"] == "RUNNING"), None)
            if stage != "update" or not calls():
                return None
            first[:] = updating(sm)
            return f"update stage running, batch 1/3 updating {first}" if len(first) == 1 else None

        killed = plane.kill_when(mid_rollout)
    # While the control plane is down, HyperPod goes on: batch 1 completes and batch 2 starts.
    clock(twin, advance=BATCH + 1)
    second = updating(sm)
    assert len(second) == 1 and second != first, (first, second)
    clock(twin, scale=TWIN_CLOCK_SCALE)
    with plane.start().client() as client:
        view = wait_terminal(client, operation_id, timeout=300)
    assert view["status"] == "SUCCEEDED", (killed, view)
    stages = {s["name"]: s for s in view["stages"]}
    assert stages["update"]["attempts"] >= 2, "the update stage did not run again after the restart"
    assert calls() == 1, twin_writes(twin)  # the resumed run did not call UpdateClusterSoftware again
    report = stages["report"]["outputs"]
    assert report["outcome"] == "completed" and set(report["nodes"]) == before, report
    [release] = set(report["nodes"].values())
    listed = sm.list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]
    assert {n["InstanceId"]: n["CurrentImageReleaseVersion"] for n in listed} == dict.fromkeys(before, release)
    group = sm.describe_cluster(ClusterName=CLUSTER)["InstanceGroups"][0]
    assert (group["SoftwareUpdateStatus"], group["ImageVersionStatus"]) == ("Succeeded", "UpToDate"), group
