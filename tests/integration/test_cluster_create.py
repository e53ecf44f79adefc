"""cluster_create through REST: one operation, six recorded stages, a verified cluster with storage bound."""

from __future__ import annotations

from typing import Any

import httpx

from instantstart.twin_process import TwinProcess
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

STAGES = ["eks", "activate", "dependencies", "hyperpod", "storage", "verification"]


def test_cluster_create_runs_all_six_stages(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        ref = client.post(
            "/api/v1/clusters",
            json={
                "clusterTag": "full",
                "instanceType": "ml.g6.4xlarge",
                "instanceCount": 1,
                "availabilityZone": "us-west-2c",
            },
        )
        assert ref.status_code == 202, ref.text
        assert ref.json()["statusTool"] == "cluster_get_status"
        view = wait_terminal(client, ref.json()["operationId"], timeout=300)
        assert view["status"] == "SUCCEEDED", view
        assert [s["name"] for s in view["stages"]] == STAGES
        assert all(s["status"] == "SUCCEEDED" and s["attempts"] >= 1 for s in view["stages"])
        status = client.get("/api/v1/clusters/status").json()
        listing = client.get("/api/v1/clusters").json()
    assert listing["activeCluster"] == "full"
    assert {k: v for k, v in listing["clusters"][0]["stages"].items() if k in STAGES} == dict.fromkeys(
        STAGES, "SUCCEEDED"
    )
    text = str(status)
    assert "s3-claim" in text
    sm: Any = twin_client(twin, "sagemaker")
    assert sm.describe_cluster(ClusterName="hp-cluster-full")["ClusterStatus"] == "InService"


def test_cluster_create_refuses_preflight_blockers(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        response = client.post(
            "/api/v1/clusters",
            json={
                "clusterTag": "nope",
                "instanceType": "ml.g6.4xlarge",
                "instanceCount": 1,
                "availabilityZone": "us-east-1a",
            },
        )
        assert response.status_code == 412
        error = response.json()["error"]
        assert error["details"]["blockers"][0]["code"] == "AZ_NOT_IN_REGION"
        assert client.get("/api/v1/clusters").json()["count"] == 0


def test_a_failed_stage_shows_failed_in_the_cluster_list_and_retry_clears_it(cp: Running, twin: TwinProcess) -> None:
    """Regression: the hyperpod stage failing with CAPACITY_UNAVAILABLE left cluster_list_all at
    `hyperpod: RUNNING`. The engine now mirrors every pipeline stage's status onto the cluster row."""
    fault = {"kind": "insufficient_capacity", "instance_type": "ml.g6.4xlarge", "availability_zone": "us-west-2c"}
    httpx.post(twin.endpoint_url + "/_twin/faults", json=fault, timeout=10).raise_for_status()
    with cp.client() as client:
        ref = client.post(
            "/api/v1/clusters",
            json={"clusterTag": "capfail", "instanceType": "ml.g6.4xlarge", "instanceCount": 1,
                  "availabilityZone": "us-west-2c"},
        ).json()
        view = wait_terminal(client, ref["operationId"], timeout=300)
        assert view["status"] == "FAILED" and view["error"]["code"] == "CAPACITY_UNAVAILABLE", view
        want = {"eks": "SUCCEEDED", "activate": "SUCCEEDED", "dependencies": "SUCCEEDED", "hyperpod": "FAILED",
                "storage": "PENDING", "verification": "PENDING"}
        assert {s["name"]: s["status"] for s in view["stages"]} == want
        rest = next(c for c in client.get("/api/v1/clusters").json()["clusters"] if c["clusterTag"] == "capfail")
        tool = client.post("/api/v1/tools/cluster_list_all", json={}).json()
        listed = next(c for c in tool["clusters"] if c["clusterTag"] == "capfail")
        assert rest["stages"] == listed["stages"] == want
        httpx.delete(twin.endpoint_url + "/_twin/faults", timeout=10).raise_for_status()
        client.post(f"/api/v1/operations/{ref['operationId']}/retry").raise_for_status()
        view = wait_terminal(client, ref["operationId"], timeout=300)
        assert view["status"] == "SUCCEEDED", view
        rest = next(c for c in client.get("/api/v1/clusters").json()["clusters"] if c["clusterTag"] == "capfail")
    assert rest["stages"] == dict.fromkeys(STAGES, "SUCCEEDED")
