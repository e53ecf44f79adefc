"""A deletion cancelled part-way (while a twin fault makes the step after its EKS step fail and retry) leaves a
record that matches the account: the eks stage DELETED, status naming what is gone and how to finish;
operation_retry finishes it."""

from __future__ import annotations

from typing import Any

import httpx

from instantstart.twin_process import TwinProcess
from tests.support.flows import make_eks, tagged_leftovers
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_for, wait_terminal


def test_cancelled_delete_after_its_eks_step_says_the_eks_cluster_is_gone(cp: Running, twin: TwinProcess) -> None:
    eks: Any = twin_client(twin, "eks")
    with cp.client() as client:
        make_eks(client, "delx")
        name = client.get("/api/v1/clusters").json()["clusters"][0]["eksClusterName"]
        plan = client.get("/api/v1/clusters/delx/deletion-plan").json()
        kinds = [r["resourceType"] for r in plan["resources"]]
        assert "iam:role" in kinds and kinds.index("eks:cluster") < kinds.index("iam:role"), kinds
        # Every IAM role deletion is refused: the deletion retries the step after the EKS cluster's; then cancelled.
        fault = {"kind": "error", "service": "iam", "operation": "DeleteRole", "code": "AccessDenied",
                 "message": "not authorized to perform iam:DeleteRole", "status": 403}
        httpx.post(twin.endpoint_url + "/_twin/faults", json=fault).raise_for_status()
        go = client.post("/api/v1/clusters/delx/delete", json={"planDigest": plan["planDigest"]})
        assert go.status_code == 202, go.text
        op = go.json()["operationId"]
        wait_for(client, op, lambda v: "AccessDenied" in v["stages"][0]["message"], timeout=180)
        assert client.post(f"/api/v1/operations/{op}/cancel").status_code in (200, 202)
        failed = wait_terminal(client, op, timeout=180)
        assert failed["status"] == "CANCELLED", failed
        assert name not in eks.list_clusters()["clusters"]
        listed = client.get("/api/v1/clusters").json()["clusters"]
        assert [c["stages"]["eks"] for c in listed if c["clusterTag"] == "delx"] == ["DELETED"], listed
        status = client.get("/api/v1/clusters/status").json()
        assert status["stages"]["eks"] == "DELETED" and not status["ready"], status
        said = next(p for p in status["problems"] if p.startswith("cluster_delete"))
        assert f"EKS cluster {name} was deleted" in said and f"operation_retry {failed['operationId']}" in said
        httpx.delete(twin.endpoint_url + "/_twin/faults").raise_for_status()
        retried = client.post(f"/api/v1/operations/{failed['operationId']}/retry")
        assert retried.status_code == 202, retried.text
        assert wait_terminal(client, retried.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
        assert client.get("/api/v1/clusters").json()["count"] == 0
    assert all(not v for v in tagged_leftovers(twin, "delx").values())
