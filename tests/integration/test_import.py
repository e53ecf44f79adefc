"""Importing an EKS cluster made elsewhere: detection, switching to it, the timeline's events feed started by the
registry (and stopped when the cluster leaves it), and a deletion that owns nothing."""

from __future__ import annotations

from typing import Any

from instantstart.services.base.watch.state import informer_key
from instantstart.twin_process import TwinProcess
from tests.support import waits
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.twin_aws import ProcessTwinView, advance, build_eks, build_network, group
from tests.support.waits import wait_terminal


def test_import_detects_and_deletion_leaves_it_alone(cp: Running, twin: TwinProcess) -> None:
    ec2: Any = twin_client(twin, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.50.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.50.{i}.0/24", AvailabilityZone=f"us-west-2{z}")["Subnet"][
            "SubnetId"
        ]
        for i, z in enumerate("ab")
    ]
    iam: Any = twin_client(twin, "iam")
    role = iam.create_role(RoleName="their-eks-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    eks: Any = twin_client(twin, "eks")
    eks.create_cluster(name="theirs", roleArn=role, resourcesVpcConfig={"subnetIds": subnets})
    with cp.client() as client:
        missing = client.post("/api/v1/clusters/import", json={"eksClusterName": "nope"})
        assert missing.status_code == 404
        ref = client.post("/api/v1/clusters/import", json={"eksClusterName": "theirs"}).json()
        assert wait_terminal(client, ref["operationId"], timeout=60)["status"] == "SUCCEEDED"
        clusters = client.get("/api/v1/clusters").json()["clusters"]
        assert clusters[0]["clusterTag"] == "theirs" and clusters[0]["imported"] is True
        # Imported: the registry started its events feed, pinned (no read keeps it alive or started it).
        key = informer_key(clusters[0]["region"], "theirs", "events")
        feed = waits.until(lambda: cp.context.informers.peek(key), "the events feed of the imported cluster")
        assert feed.idle_seconds is None
        # And its pods feed (usage_report's accelerator holds), pinned the same way.
        pods = waits.until(lambda: cp.context.informers.peek(informer_key(clusters[0]["region"], "theirs", "pods")),
                           "the pods feed of the imported cluster")
        assert pods.idle_seconds is None
        page = client.get("/api/v1/clusters/timeline", params={"clusterTag": "theirs", "source": "kubernetes"})
        assert page.status_code == 200 and page.json()["unavailable"] == [], page.text
        plan = client.get("/api/v1/clusters/theirs/deletion-plan").json()
        assert plan["imported"] is True and plan["resources"] == []
        go = client.post("/api/v1/clusters/theirs/delete", json={"planDigest": plan["planDigest"]}).json()
        assert wait_terminal(client, go["operationId"], timeout=60)["status"] == "SUCCEEDED"
        assert client.get("/api/v1/clusters").json()["count"] == 0
        waits.until(lambda: cp.context.informers.peek(key) is None, "the feed stopped with the cluster's deletion")
        assert cp.context.informers.peek(informer_key(clusters[0]["region"], "theirs", "pods")) is None
    assert eks.describe_cluster(name="theirs")["cluster"]["name"] == "theirs"
    assert ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"]


def test_nodes_of_an_imported_hyperpod_cluster_are_not_deleted_or_replaced(cp: Running, twin: TwinProcess) -> None:
    """The control-plane policy lets it delete or replace nodes only on a HyperPod cluster carrying the installation
    tag: an imported one is refused up front (PRECONDITION_FAILED, saying how to allow it), not by IAM midway.
    Once the operator tags it, the replacement goes through the twin's IAM check of the control plane's call."""
    view: Any = ProcessTwinView(twin)
    net = build_network(view)
    eks_arn = build_eks(view, net, "their-eks")
    sm: Any = twin_client(twin, "sagemaker")
    arn = sm.create_cluster(
        ClusterName="their-hp",
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[group("workers", "ml.t3.medium", 1)],
    )["ClusterArn"]
    advance(view, 1200)
    node = sm.list_cluster_nodes(ClusterName="their-hp")["ClusterNodeSummaries"][0]["InstanceId"]
    with cp.client() as client:
        ref = client.post("/api/v1/clusters/import", json={"eksClusterName": "their-eks", "clusterTag": "theirs"})
        assert wait_terminal(client, ref.json()["operationId"], timeout=60)["status"] == "SUCCEEDED"
        for action in ("replace", "delete"):
            refused = client.post(f"/api/v1/capacity/nodes/{action}", json={"nodeId": node, "clusterTag": "theirs"})
            assert refused.status_code == 412, refused.text
            body = refused.json()["error"]
            assert "instantstart:installation" in body["message"] and "sagemaker add-tags" in body["hint"], body
        sm.add_tags(ResourceArn=arn, Tags=[{"Key": "instantstart:installation", "Value": "operator"}])
        ref = client.post("/api/v1/capacity/nodes/replace", json={"nodeId": node, "clusterTag": "theirs"})
        assert ref.status_code == 202, ref.text
        assert wait_terminal(client, ref.json()["operationId"], timeout=120)["status"] == "SUCCEEDED"
    assert sm.describe_cluster(ClusterName="their-hp")["ClusterArn"] == arn
