"""monitoring_gpu_utilization end to end on the twin: off (with how to turn it on) until the observability
feature is enabled; then a pod holding the node's GPU shows as a busy GPU read from the AMP workspace's PromQL
API (SigV4 `aps`, instant and range queries), per node and instance type, with the workspace and Grafana links;
and the timeline filtered to an object prefix (a job and its pods) through the same read the pages use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.flows import kube, make_hyperpod, mcp_calls
from tests.support.servers import Running
from tests.support.twin import TwinProcess, shared_control_plane, twin_client
from tests.support.waits import until, wait_terminal

TAG = "gpu19"
TYPE = "ml.g6.4xlarge"  # make_hyperpod: one node, 1 GPU

shared_cp = shared_control_plane(lambda client: make_hyperpod(client, TAG), status_cache_seconds=0.5)


@pytest.fixture(scope="module")
def shared(shared_cp: Running, twin_process: TwinProcess) -> tuple[Running, TwinProcess]:
    """The module's control plane and the twin it runs on."""
    return shared_cp, twin_process


def gpu(client: httpx.Client, **params: Any) -> dict[str, Any]:
    """monitoring_gpu_utilization through REST."""
    response = client.get("/api/v1/monitoring/gpu-utilization", params=params)
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload


def test_gpu_utilisation_is_off_until_observability_then_reads_the_workspace(
    shared: tuple[Running, TwinProcess], tmp_path: Path
) -> None:
    cp, twin = shared
    with cp.client() as client:
        off = gpu(client)
        assert off["observability"]["enabled"] is False and off["series"] == [] and off["meanPercent"] is None
        assert "hyperpod_update_advanced_features" in off["observability"]["reason"]
        ref = client.post("/api/v1/capacity/advanced-features", json={"observability": {"enabled": True}})
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"], timeout=240)["status"] == "SUCCEEDED"
        core = kube(twin, tmp_path, TAG)
        core.create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-burner"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        })

        def reported() -> dict[str, Any] | None:
            found = gpu(client, rangeMinutes=30)
            return found if (found["meanPercent"] or 0) > 80 else None

        busy = until(reported, "the held GPU reported busy", timeout=60, every=0.5)
    workspace = twin_client(twin, "amp").list_workspaces(alias=f"instantstart-{TAG}")["workspaces"][0]
    links = busy["observability"]
    assert links["enabled"] and links["workspaceId"] == workspace["workspaceId"]
    assert links["prometheusConsoleUrl"].endswith(f"#/workspaces/workspace/{workspace['workspaceId']}")
    assert "/grafana/home?region=" in links["grafanaConsoleUrl"] and links["queryUrl"].endswith("/api/v1/query")
    assert busy["gpusReporting"] == 1 and 85 <= busy["meanPercent"] <= 99
    assert [(g["name"], g["gpus"]) for g in busy["byInstanceType"]] == [(TYPE, 1)]
    [node] = busy["byNode"]
    assert node["name"].startswith("hyperpod-i-") and node["percent"] == busy["meanPercent"] and busy["nodesTotal"] == 1
    assert busy["stepSeconds"] == 30 and 1 <= len(busy["series"]) <= 60
    assert busy["series"][-1]["percent"] > 80  # the range query ends with the pod running
    [mcp] = mcp_calls(cp, [("monitoring_gpu_utilization", {"rangeMinutes": 5})])
    assert mcp["observability"]["workspaceId"] == workspace["workspaceId"] and mcp["gpusReporting"] == 1


def test_range_is_bounded_and_validated(shared: tuple[Running, TwinProcess]) -> None:
    cp, _ = shared
    with cp.client() as client:
        bad = client.get("/api/v1/monitoring/gpu-utilization", params={"rangeMinutes": 2})
        assert bad.status_code == 422 and "rangeMinutes" in bad.text, bad.text
        week = gpu(client, rangeMinutes=10080)
    assert len(week["series"]) <= 60 and week["stepSeconds"] == 10080 * 60 // 60


def test_timeline_by_object_prefix_is_a_job_and_its_pods(shared: tuple[Running, TwinProcess], tmp_path: Path) -> None:
    cp, twin = shared
    core = kube(twin, tmp_path, TAG)
    for name in ("train-a-worker-0", "train-ab-worker-0", "other"):
        core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    with cp.client() as client:
        def entries() -> list[dict[str, Any]] | None:
            page = client.get("/api/v1/clusters/timeline", params={"objectPrefix": "train-a", "limit": 200}).json()
            found: list[dict[str, Any]] = page["entries"]
            return found if any(e["objectName"] == "train-a-worker-0" for e in found) else None

        found = until(entries, "the job's pod events in the timeline", timeout=60, every=0.5)
        bad = client.get("/api/v1/clusters/timeline", params={"objectPrefix": "Train_A"})
    assert {e["objectName"] for e in found} == {"train-a-worker-0"}  # not train-ab-…, not other
    assert bad.status_code == 422 and "objectPrefix" in bad.text


def test_closing_the_log_of_a_quiet_container_leaves_the_server_answering(shared: tuple[Running, TwinProcess]) -> None:
    # The job page follows a pod's log over /api/v1/ws/logs; leaving it closes the socket. For a container that
    # writes nothing more (gpu-burner after its start line), closing the followed response on the event loop
    # waited for the next line, forever: every later request hung (found by the job page's browser test).
    from websockets.sync.client import connect

    cp, _ = shared
    url = cp.url.replace("http://", "ws://") + "/api/v1/ws/logs?pod=gpu-burner&container=c"
    with connect(url, additional_headers={"Authorization": f"Bearer {cp.token}"}, open_timeout=60) as socket:
        first = json.loads(socket.recv(timeout=60))
        assert first["type"] == "line", first
    with cp.client() as client:
        for _ in range(3):  # the loop is free: REST reads and a new follow of the same pod answer at once
            assert client.get("/api/v1/clusters", timeout=60).status_code == 200
        with connect(url, additional_headers={"Authorization": f"Bearer {cp.token}"}, open_timeout=60) as socket:
            assert json.loads(socket.recv(timeout=60))["type"] == "line"


def test_the_query_adapter_translates_the_workspace_api_errors(
    shared: tuple[Running, TwinProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from instantstart.aws import amp_query
    from instantstart.aws.clients import AwsClients
    from instantstart.errors import InvalidInput, NotFound
    from instantstart.settings import Settings

    _, twin = shared
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    aws = AwsClients(Settings(data_dir=tmp_path, aws_endpoint_url=twin.endpoint_url, aws_region="us-west-2"))
    [workspace] = twin_client(twin, "amp").list_workspaces(alias=f"instantstart-{TAG}")["workspaces"]
    base = amp_query.workspace_url(aws, "us-west-2", workspace["workspaceId"], None)
    assert base == f"{twin.endpoint_url}/workspaces/{workspace['workspaceId']}/"
    data = amp_query.query(aws, "us-west-2", base, "query", {"query": 'count(DCGM_FI_DEV_GPU_UTIL{gpu="0"})'})
    assert data["resultType"] == "vector" and data["result"][0]["value"][1] == "1"
    with pytest.raises(NotFound, match="does not exist") as missing:
        amp_query.query(aws, "us-west-2", amp_query.workspace_url(aws, "us-west-2", "ws-missing", None), "query",
                        {"query": "up"})
    assert "hyperpod_update_advanced_features" in missing.value.hint
    with pytest.raises(InvalidInput, match="refused the query") as bad:
        amp_query.query(aws, "us-west-2", base, "query", {"query": "rate(DCGM_FI_DEV_GPU_UTIL[5m])"})
    assert "bad_data" not in bad.value.message and "the twin evaluates" in bad.value.message
