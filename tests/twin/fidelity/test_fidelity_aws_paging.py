"""AWS may answer fewer items than MaxResults asks (with a NextToken): the twin's `page_size` fault makes it
do so, and the control plane's list calls follow every page (HyperPod clusters, their nodes)."""

from __future__ import annotations

import pytest

from hyperpod_twin.twin import Twin
from instantstart.aws import hyperpod
from instantstart.aws.clients import AwsClients
from instantstart.settings import Settings
from tests.support.twin_aws import advance, build_eks, build_network, control, group

NAMES = ("page-a", "page-b", "page-c")


def test_list_calls_follow_every_page(aws_twin: Twin, monkeypatch: pytest.MonkeyPatch) -> None:
    net = build_network(aws_twin, "10.7")
    eks_arn = build_eks(aws_twin, net, "paging")
    sm = aws_twin.boto3_client("sagemaker")
    for name in NAMES:
        sm.create_cluster(
            ClusterName=name,
            Orchestrator={"Eks": {"ClusterArn": eks_arn}},
            VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
            InstanceGroups=[group("cpu", "ml.m5.xlarge", 3)],
        )
    advance(aws_twin, 900)
    plain = sm.list_cluster_nodes(ClusterName="page-a")["ClusterNodeSummaries"]
    assert plain and not any("NodeLogicalId" in n for n in plain)  # only with IncludeNodeLogicalIds
    logical = sm.list_cluster_nodes(ClusterName="page-a", IncludeNodeLogicalIds=True)["ClusterNodeSummaries"]
    assert all(n["NodeLogicalId"] for n in logical)
    for operation in ("ListClusters", "ListClusterNodes"):
        control(aws_twin, "faults", {"kind": "page_size", "service": "sagemaker", "operation": operation, "size": 1})
    try:
        first = sm.list_clusters(MaxResults=100)
        assert len(first["ClusterSummaries"]) == 1 and first["NextToken"], "the fault did not shorten the page"

        for key, value in aws_twin.env().items():
            monkeypatch.setenv(key, value)
        aws = AwsClients(Settings(aws_endpoint_url=aws_twin.endpoint_url))
        region = aws_twin.env()["AWS_DEFAULT_REGION"]
        names = {c["ClusterName"] for c in hyperpod.list_clusters(aws, region)}
        assert set(NAMES) <= names, "ListClusters pages after the first were not read"
        nodes = hyperpod.list_nodes(aws, region, "page-b", "cpu")
        assert len(nodes) == 3 and len({n["InstanceId"] for n in nodes}) == 3
    finally:
        control(aws_twin, "faults", method="DELETE")
