"""Cluster deletion: the plan first, then everything tagged with the cluster tag is gone from the twin."""

from __future__ import annotations

from typing import Any

from instantstart.twin_process import TwinProcess
from tests.support.flows import make_eks, tagged_leftovers
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

TAG = "instantstart:cluster-tag"


def test_cluster_delete_plans_then_leaves_nothing_tagged(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        make_eks(client, "del1")
        ref = client.post(
            "/api/v1/clusters/hyperpod",
            json={
                "AcceleratedInstanceType": "ml.g6.4xlarge",
                "AcceleratedInstanceCount": 1,
                "availabilityZone": "us-west-2b",
            },
        ).json()
        assert wait_terminal(client, ref["operationId"], timeout=120)["status"] == "SUCCEEDED"
        before = tagged_leftovers(twin, "del1")
        assert before["vpcs"] and before["hyperpod"] and before["eks"] and before["roles"]
        plan = client.get("/api/v1/clusters/del1/deletion-plan").json()
        kinds = [r["resourceType"] for r in plan["resources"]]
        assert kinds.index("sagemaker:cluster") < kinds.index("eks:cluster") < kinds.index("ec2:subnet")
        assert kinds.index("ec2:subnet") < kinds.index("ec2:vpc") and kinds[-1] == "ec2:vpc"
        # The twin account already had the project bucket, so this cluster did not create it: not planned.
        assert "s3:bucket" not in kinds
        stale = client.post("/api/v1/clusters/del1/delete", json={"planDigest": "0" * 16})
        assert stale.status_code == 409 and stale.json()["error"]["details"]["planDigest"] == plan["planDigest"]
        go = client.post("/api/v1/clusters/del1/delete", json={"planDigest": plan["planDigest"]})
        assert go.status_code == 202, go.text
        view = wait_terminal(client, go.json()["operationId"], timeout=180)
        assert view["status"] == "SUCCEEDED", view
        assert client.get("/api/v1/clusters").json()["count"] == 0
    leftovers = tagged_leftovers(twin, "del1")
    assert all(not v for v in leftovers.values()), leftovers
    s3: Any = twin_client(twin, "s3")
    assert any(b["Name"].startswith("instantstart-") for b in s3.list_buckets()["Buckets"])  # kept


def test_delete_after_a_full_cluster_create(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        ref = client.post(
            "/api/v1/clusters",
            json={
                "clusterTag": "del2",
                "instanceType": "ml.g6.4xlarge",
                "instanceCount": 1,
                "availabilityZone": "us-west-2c",
            },
        ).json()
        assert wait_terminal(client, ref["operationId"], timeout=300)["status"] == "SUCCEEDED"
        plan = client.get("/api/v1/clusters/del2/deletion-plan").json()
        kinds = {r["resourceType"] for r in plan["resources"]}
        assert {"eks:addon", "eks:pod-identity-association", "iam:role", "sagemaker:cluster"} <= kinds
        go = client.post("/api/v1/clusters/del2/delete", json={"planDigest": plan["planDigest"]}).json()
        view = wait_terminal(client, go["operationId"], timeout=300)
        assert view["status"] == "SUCCEEDED", view
    leftovers = tagged_leftovers(twin, "del2")
    assert all(not v for v in leftovers.values()), leftovers
    eks: Any = twin_client(twin, "eks")
    assert "eks-cluster-del2" not in eks.list_clusters()["clusters"]


def test_load_balancer_services_are_deleted_first(cp: Running, twin: TwinProcess) -> None:
    from kubernetes import client as k8s

    from instantstart.aws.clients import AwsClients
    from instantstart.kube.client import KubeClients
    from instantstart.settings import Settings

    with cp.client() as client:
        make_eks(client, "del3")
        kube = KubeClients(AwsClients(Settings(aws_endpoint_url=twin.endpoint_url)))
        core = k8s.CoreV1Api(kube.api_client("eks-cluster-del3"))
        core.create_namespaced_service(
            "default",
            {
                "metadata": {"name": "web"},
                "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80}]},
            },
        )
        plan = client.get("/api/v1/clusters/del3/deletion-plan").json()
        assert plan["resources"][0]["resourceType"] == "k8s:loadbalancer-service"
        assert plan["resources"][0]["resourceId"] == "default/web"
        go = client.post("/api/v1/clusters/del3/delete", json={"planDigest": plan["planDigest"]}).json()
        view = wait_terminal(client, go["operationId"], timeout=180)
        assert view["status"] == "SUCCEEDED", view
        assert view["stages"][0]["outputs"]["deleted"] == len(plan["resources"])
    assert all(not v for v in tagged_leftovers(twin, "del3").values())


def test_deleting_one_cluster_leaves_its_neighbour_alone(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        make_eks(client, "keep1")
        make_eks(client, "gone1")
        before = tagged_leftovers(twin, "keep1")
        plan = client.get("/api/v1/clusters/gone1/deletion-plan").json()
        mine = {r["resourceId"] for r in plan["resources"]}
        shared = mine & {x for values in before.values() for x in values}
        assert not shared, shared
        go = client.post("/api/v1/clusters/gone1/delete", json={"planDigest": plan["planDigest"]}).json()
        assert wait_terminal(client, go["operationId"], timeout=180)["status"] == "SUCCEEDED"
    assert tagged_leftovers(twin, "keep1") == before
    assert all(not v for v in tagged_leftovers(twin, "gone1").values())
