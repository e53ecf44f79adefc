"""Lifecycle failures as AWS shows them: a deep health check that fails rolls a classic-mode creation back,
and EC2 refuses subnets smaller than /28."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import Net, advance, build_eks, build_network, control, group


@pytest.fixture(scope="module")
def env(aws_twin: Twin) -> Iterator[tuple[Net, str]]:
    net = build_network(aws_twin)
    yield net, build_eks(aws_twin, net, "lifecycle")


def test_failed_deep_health_check_rolls_the_creation_back(aws_twin: Twin, env: tuple[Net, str]) -> None:
    net, eks_arn = env
    control(aws_twin, "faults", {"kind": "deep_health_check_failure", "instance_type": "ml.g5.8xlarge",
                                 "message": "Deep health check InstanceStress failed: GPU 0 ECC errors"})
    sm = aws_twin.boto3_client("sagemaker")
    sm.create_cluster(
        ClusterName="dhc",
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[group("gpu", "ml.g5.8xlarge", 1, OnStartDeepHealthChecks=["InstanceStress"])],
    )
    seen = set()
    for _ in range(40):
        advance(aws_twin, 60)
        seen.add(sm.describe_cluster(ClusterName="dhc")["ClusterStatus"])
        if "Failed" in seen:
            break
    assert "Failed" in seen
    events = sm.list_cluster_events(ClusterName="dhc")["Events"]
    assert any("ECC errors" in (e.get("Description") or "") for e in events), events
    control(aws_twin, "faults", method="DELETE")


@pytest.mark.parametrize("cidr", ["10.9.0.0/29", "10.9.0.0/15"])
def test_subnet_size_limits(aws_twin: Twin, env: tuple[Net, str], cidr: str) -> None:
    net, _ = env
    ec2 = aws_twin.boto3_client("ec2")
    with pytest.raises(ClientError) as info:
        ec2.create_subnet(VpcId=net.vpc, CidrBlock=cidr)
    assert info.value.response["Error"]["Code"] == "InvalidSubnet.Range"


def test_list_clusters_defaults_to_creation_time_ascending(aws_twin: Twin, env: tuple[Net, str]) -> None:
    net, eks_arn = env
    sm = aws_twin.boto3_client("sagemaker")
    for name in ("sort-b", "sort-a"):
        advance(aws_twin, 1)
        sm.create_cluster(
            ClusterName=name,
            Orchestrator={"Eks": {"ClusterArn": eks_arn}},
            VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
            InstanceGroups=[group("cpu", "ml.m5.xlarge", 1)],
        )
    names = [c["ClusterName"] for c in sm.list_clusters(NameContains="sort-")["ClusterSummaries"]]
    assert names == ["sort-b", "sort-a"]
    by_time = [c["ClusterName"] for c in sm.list_clusters(NameContains="sort-", SortOrder="Descending")[
        "ClusterSummaries"]]
    assert by_time == ["sort-a", "sort-b"]


def test_min_instance_count_decides_in_service(aws_twin: Twin, env: tuple[Net, str]) -> None:
    """Two of three instances cannot launch; MinInstanceCount=1 makes the group (and cluster) InService
    with the one that runs instead of rolling the creation back."""
    net, eks_arn = env
    control(aws_twin, "faults", {"kind": "insufficient_capacity", "instance_type": "ml.c5.xlarge", "count": 2})
    sm = aws_twin.boto3_client("sagemaker")
    sm.create_cluster(
        ClusterName="min-count",
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[group("cpu", "ml.c5.xlarge", 3, MinInstanceCount=1)],
    )
    advance(aws_twin, 900)
    described = sm.describe_cluster(ClusterName="min-count")
    assert described["ClusterStatus"] == "InService"
    details = described["InstanceGroups"][0]
    assert (details["Status"], details["CurrentCount"], details["TargetCount"], details["MinCount"]) == (
        "InService", 1, 3, 1)
    control(aws_twin, "faults", method="DELETE")


def test_continuous_nodes_exist_before_their_instance(aws_twin: Twin, env: tuple[Net, str]) -> None:
    """Continuous provisioning: a node is known by its NodeLogicalId before EC2 gives it an instance. Until then
    ListClusterNodes shows it only with IncludeNodeLogicalIds, without InstanceId, and DescribeClusterNode finds it
    by NodeLogicalId only (FACTS §1.5, the IncludeNodeLogicalIds member of the model)."""
    net, eks_arn = env
    sm = aws_twin.boto3_client("sagemaker")
    sm.create_cluster(
        ClusterName="no-instance-yet",
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[group("cpu", "ml.m5.xlarge", 2)],
        NodeProvisioningMode="Continuous",
    )
    assert sm.list_cluster_nodes(ClusterName="no-instance-yet")["ClusterNodeSummaries"] == []
    provisioning = sm.list_cluster_nodes(ClusterName="no-instance-yet", IncludeNodeLogicalIds=True)[
        "ClusterNodeSummaries"]
    assert len(provisioning) == 2
    for summary in provisioning:
        assert "InstanceId" not in summary and "PrivateDnsHostname" not in summary
        assert summary["NodeLogicalId"] and summary["InstanceStatus"]["Status"] == "Pending"
    details = sm.describe_cluster_node(ClusterName="no-instance-yet", NodeLogicalId=provisioning[0]["NodeLogicalId"])
    assert "InstanceId" not in details["NodeDetails"]
    assert details["NodeDetails"]["InstanceStatus"]["Status"] == "Pending"
    advance(aws_twin, 61)
    launched = sm.list_cluster_nodes(ClusterName="no-instance-yet")["ClusterNodeSummaries"]
    assert len(launched) == 2 and all(s["InstanceId"].startswith("i-") for s in launched)
    assert all("NodeLogicalId" not in s for s in launched)
    by_id = sm.describe_cluster_node(ClusterName="no-instance-yet", NodeId=launched[0]["InstanceId"])["NodeDetails"]
    assert by_id["InstanceStatus"]["Status"] == "Pending" and by_id["NodeLogicalId"]


def test_eks_delete_is_refused_while_an_update_is_in_progress(aws_twin: Twin, env: tuple[Net, str]) -> None:
    """EKS answers 409 ResourceInUseException "Cannot delete because cluster … currently has an update in progress"
    (aws/containers-roadmap#1511, eksctl-io/eksctl#4979); once the update is done the deletion is accepted. Deleting
    a cluster still CREATING is accepted: no source shows EKS or HyperPod refusing it (docs/TWIN.md)."""
    net, _ = env
    eks = aws_twin.boto3_client("eks")
    build_eks(aws_twin, net, "busy")
    eks.update_cluster_config(name="busy", logging={"clusterLogging": [{"types": ["api"], "enabled": True}]})
    with pytest.raises(ClientError) as info:
        eks.delete_cluster(name="busy")
    assert info.value.response["Error"] == {
        "Code": "ResourceInUseException",
        "Message": "Cannot delete because cluster busy currently has an update in progress"}
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    advance(aws_twin, 600)
    assert eks.delete_cluster(name="busy")["cluster"]["status"] == "DELETING"
