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


def features(client: httpx.Client, observability: dict[str, Any]) -> dict[str, Any]:
    """hyperpod_update_advanced_features {observability} through REST, to the observability feature's result."""
    ref = client.post("/api/v1/capacity/advanced-features", json={"observability": observability})
    assert ref.status_code == 202, ref.text
    done = wait_terminal(client, ref.json()["operationId"], timeout=240)
    assert done["status"] == "SUCCEEDED", done
    [result] = done["result"]["features"]
    return dict(result)


def foreign_workspace(twin: TwinProcess) -> dict[str, Any]:
    """A workspace somebody else made (not tagged by InstantStart), with its own role."""
    iam = twin_client(twin, "iam")
    trust = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "grafana.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    try:
        role = iam.create_role(RoleName="team-grafana", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    except iam.exceptions.EntityAlreadyExistsException:
        role = iam.get_role(RoleName="team-grafana")["Role"]["Arn"]
    created: dict[str, Any] = twin_client(twin, "grafana").create_workspace(
        accountAccessType="CURRENT_ACCOUNT", permissionType="CUSTOMER_MANAGED", authenticationProviders=["SAML"],
        workspaceRoleArn=role, workspaceName="team-dashboards", tags={"team": "ml"})["workspace"]
    return created


def links_when(client: httpx.Client, wanted: str | None) -> dict[str, Any]:
    """The observability links once the Grafana workspace URL is `wanted` (the view caches its look-ups)."""
    def seen() -> dict[str, Any] | None:
        found: dict[str, Any] = gpu(client, rangeMinutes=5)["observability"]
        return found if found.get("grafanaWorkspaceUrl") == wanted else None

    return until(seen, f"the Grafana link {wanted}", timeout=30, every=0.5)


def test_grafana_workspace_is_adopted_created_linked_and_only_ours_deleted(shared: tuple[Running, TwinProcess]) -> None:
    cp, twin = shared
    grafana: Any = twin_client(twin, "grafana")
    theirs = foreign_workspace(twin)
    until(lambda: grafana.describe_workspace(workspaceId=theirs["id"])["workspace"]["status"] == "ACTIVE",
          "the foreign workspace ACTIVE", timeout=30, every=0.2)
    httpx.post(twin.endpoint_url + "/_twin/faults", json={"kind": "grafana_failure", "count": 1}).raise_for_status()
    broken = foreign_workspace(twin)
    until(lambda: grafana.describe_workspace(workspaceId=broken["id"])["workspace"]["status"] == "CREATION_FAILED",
          "the broken workspace CREATION_FAILED", timeout=30, every=0.2)
    field = "observability.grafanaWorkspaceId"
    with cp.client() as client:
        before = gpu(client)["observability"]
        assert before["grafanaWorkspaceId"] is None and before["grafanaWorkspaceUrl"] is None
        assert before["grafanaUrl"] == before["grafanaConsoleUrl"]  # no workspace known: the console
        # Refusals, before any operation: unknown id, a workspace that is not ACTIVE, a malformed id, both options.
        post = "/api/v1/capacity/advanced-features"
        missing = client.post(post, json={"observability": {"enabled": True, "grafanaWorkspaceId": "g-0123456789"}})
        assert missing.status_code == 422, missing.text
        error = missing.json()["error"]
        assert field in error["message"] and "grafana: true" in error["hint"]
        assert error["details"]["fields"][0]["field"] == field
        failed = client.post(post, json={"observability": {"enabled": True, "grafanaWorkspaceId": broken["id"]}})
        assert failed.status_code == 412 and "CREATION_FAILED" in failed.text and field in failed.text, failed.text
        for body in ({"enabled": True, "grafanaWorkspaceId": "grafana-1"},
                     {"enabled": True, "grafanaWorkspaceId": theirs["id"], "grafana": True},
                     {"enabled": False, "grafana": True}):
            bad = client.post(post, json={"observability": body})
            assert bad.status_code == 422 and "grafana" in bad.text, (body, bad.text)
        # Adopt: linked by its URL, never tagged or touched.
        adopted = features(client, {"enabled": True, "grafanaWorkspaceId": theirs["id"]})
        assert adopted["actual"]["grafana"]["workspaceId"] == theirs["id"]
        assert adopted["actual"]["grafana"]["createdByInstantStart"] is False
        url = f"https://{theirs['endpoint']}"
        assert url == f"https://{theirs['id']}.grafana-workspace.us-west-2.amazonaws.com"
        links = links_when(client, url)
        assert links["grafanaWorkspaceId"] == theirs["id"] and links["grafanaUrl"] == url
        # Create ours: tagged with the cluster tag, ACTIVE before the operation ends, linked instead.
        made = features(client, {"enabled": True, "grafana": True})
        ours = made["actual"]["grafana"]
        assert ours["createdByInstantStart"] and ours["status"] == "ACTIVE" and ours["workspaceId"] != theirs["id"]
        described = grafana.describe_workspace(workspaceId=ours["workspaceId"])["workspace"]
        assert described["tags"]["instantstart:cluster-tag"] == TAG
        assert described["permissionType"] == "CUSTOMER_MANAGED" and described["accountAccessType"] == "CURRENT_ACCOUNT"
        assert described["authentication"]["providers"] == ["AWS_SSO"]
        assert described["workspaceRoleArn"].endswith(f":role/instantstart-{TAG}-grafana")
        assert links_when(client, f"https://{described['endpoint']}")["grafanaWorkspaceId"] == ours["workspaceId"]
        # Idempotent: the same request finds it by tag and creates nothing.
        again = features(client, {"enabled": True, "grafana": True})
        assert again["action"] == "unchanged" and again["actual"]["grafana"]["workspaceId"] == ours["workspaceId"]
        tagged = [w for w in grafana.list_workspaces()["workspaces"]
                  if w.get("tags", {}).get("instantstart:cluster-tag") == TAG]
        assert [w["id"] for w in tagged] == [ours["workspaceId"]]
        state = client.get("/api/v1/capacity/advanced-features").json()["observability"]["actual"]["grafana"]
        assert state["workspaceId"] == ours["workspaceId"] and state["url"] == f"https://{described['endpoint']}"
        # Naming our own workspace as the one to adopt keeps it ours (not deleted, still deleted with the feature).
        same = features(client, {"enabled": True, "grafanaWorkspaceId": ours["workspaceId"]})
        assert same["actual"]["grafana"]["createdByInstantStart"] is True, same
        assert grafana.describe_workspace(workspaceId=ours["workspaceId"])["workspace"]["status"] == "ACTIVE"
        # grafana: false deletes ours; the link falls back to the console.
        dropped = features(client, {"enabled": True, "grafana": False})
        assert "observability.grafanaWorkspace" in dropped["actual"]["changed"], dropped
        assert dropped["actual"]["grafana"] is None and dropped["action"] == "updated"
        fallback = links_when(client, None)
        assert fallback["grafanaUrl"] == fallback["grafanaConsoleUrl"]
        assert "/grafana/home?region=" in fallback["grafanaUrl"]
        # A creation that ends CREATION_FAILED fails the feature, naming the workspace and the way out.
        httpx.post(twin.endpoint_url + "/_twin/faults", json={"kind": "grafana_failure", "count": 1}).raise_for_status()
        ref = client.post(post, json={"observability": {"enabled": True, "grafana": True}})
        assert ref.status_code == 202, ref.text
        failed_op = wait_terminal(client, ref.json()["operationId"], timeout=240)
        assert failed_op["status"] == "FAILED", failed_op
        [result] = failed_op["result"]["features"]
        assert result["status"] == "FAILED" and result["code"] == "DEPENDENCY_FAILED", result
        assert "CREATION_FAILED" in result["message"] and "grafana: false" in result["hint"], result
        # Disabling observability deletes ours (the failed one, and its role), never the adopted one.
        off = features(client, {"enabled": False})
        assert "observability.grafanaWorkspace" in off["actual"]["removed"], off
        assert "observability.grafanaRole" in off["actual"]["removed"], off
    remaining = {w["id"]: w["status"] for w in grafana.list_workspaces()["workspaces"]}
    assert not [w for w, status in remaining.items() if w not in (theirs["id"], broken["id"]) and status != "DELETING"]
    assert remaining.get(ours["workspaceId"], "DELETING") == "DELETING", remaining  # deleting, or gone already
    roles = [r["RoleName"] for r in twin_client(twin, "iam").list_roles()["Roles"]]
    assert f"instantstart-{TAG}-grafana" not in roles
    assert grafana.describe_workspace(workspaceId=theirs["id"])["workspace"]["status"] == "ACTIVE"
    assert "team" in grafana.list_tags_for_resource(resourceArn=f"arn:aws:grafana:us-west-2:111122223333:/workspaces/"
                                                                f"{theirs['id']}")["tags"]
