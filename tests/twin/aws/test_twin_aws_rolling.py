"""UpdateClusterSoftware with a DeploymentConfig on the twin: batches by count or percentage on the twin clock, the
API's SoftwareUpdateStatus sequence, an alarm that rolls the updated nodes back RollbackMaximumBatchSize at a
time, and the refusals of what the API refuses."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.aws.hyperpod_model import DEFAULT_IMAGE_RELEASE, LATEST_IMAGE_RELEASE
from hyperpod_twin.aws.hyperpod_rolling import batch_size
from hyperpod_twin.twin import Twin
from tests.support.twin_aws import advance, build_eks, build_network, group

NAME = "hp-roll"


@pytest.fixture(scope="module")
def sm(twin: Twin) -> Any:
    """A cluster with one group of five nodes, InService."""
    net = build_network(twin, "10.60")
    eks_arn = build_eks(twin, net, "roll-eks")
    client = twin.boto3_client("sagemaker")
    client.create_cluster(
        ClusterName=NAME,
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[group("workers", "ml.g5.8xlarge", 5)],
    )
    advance(twin, 900)
    assert client.describe_cluster(ClusterName=NAME)["ClusterStatus"] == "InService"
    return client


def state(sm: Any) -> tuple[str, str, list[tuple[str, str]]]:
    """Cluster status, the group's SoftwareUpdateStatus, and (status, release) per node oldest first."""
    described = sm.describe_cluster(ClusterName=NAME)
    nodes = sorted(sm.list_cluster_nodes(ClusterName=NAME)["ClusterNodeSummaries"],
                   key=lambda n: (round(n["LaunchTime"].timestamp(), 3), n["InstanceId"]))
    return (described["ClusterStatus"], described["InstanceGroups"][0].get("SoftwareUpdateStatus", "-"),
            [(n["InstanceStatus"]["Status"], n["CurrentImageReleaseVersion"]) for n in nodes])


def test_batch_sizes() -> None:
    assert batch_size({"Type": "INSTANCE_COUNT", "Value": 2}, 5) == 2
    assert batch_size({"Type": "INSTANCE_COUNT", "Value": 9}, 5) == 5
    assert batch_size({"Type": "CAPACITY_PERCENTAGE", "Value": 40}, 5) == 2
    assert batch_size({"Type": "CAPACITY_PERCENTAGE", "Value": 10}, 5) == 1  # never 0
    assert batch_size(None, 5) == 5


def test_percentage_batches_with_a_wait_complete(twin: Twin, sm: Any) -> None:
    old, new = DEFAULT_IMAGE_RELEASE, LATEST_IMAGE_RELEASE
    sm.update_cluster_software(ClusterName=NAME, DeploymentConfig={
        "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "CAPACITY_PERCENTAGE", "Value": 40}},
        "WaitIntervalInSeconds": 120})
    up, run = "SystemUpdating", "Running"
    assert state(sm) == (up, "InProgress", [(up, old)] * 2 + [(run, old)] * 3)
    advance(twin, 601)
    assert state(sm) == (up, "InProgress", [(run, new)] * 2 + [(run, old)] * 3)  # the wait between batches
    advance(twin, 120)
    assert state(sm)[2] == [(run, new)] * 2 + [(up, old)] * 2 + [(run, old)]
    advance(twin, 601)
    advance(twin, 120)
    assert state(sm)[2] == [(run, new)] * 4 + [(up, old)]
    advance(twin, 601)
    assert state(sm) == ("InService", "Succeeded", [(run, new)] * 5)
    group_view = sm.describe_cluster(ClusterName=NAME)["InstanceGroups"][0]
    assert group_view["CurrentImageReleaseVersion"] == new and group_view["ImageVersionStatus"] == "UpToDate"
    texts = [e["Description"] for e in sm.list_cluster_events(ClusterName=NAME, MaxResults=100)["Events"]]
    assert any("5 node(s) in 3 batch(es) of at most 2" in t for t in texts), texts


def test_an_alarm_set_during_a_batch_rolls_the_updated_and_updating_nodes_back_one_at_a_time(
    twin: Twin, sm: Any
) -> None:
    cw = twin.boto3_client("cloudwatch")
    cw.put_metric_alarm(AlarmName="errors", MetricName="Errors", Namespace="Test", Statistic="Sum", Period=60,
                        EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanOrEqualToThreshold")
    new, target = LATEST_IMAGE_RELEASE, DEFAULT_IMAGE_RELEASE
    sm.update_cluster_software(
        ClusterName=NAME,
        InstanceGroups=[{"InstanceGroupName": "workers", "ImageReleaseVersion": target}],
        DeploymentConfig={
            "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 2},
                                    "RollbackMaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1}},
            "AutoRollbackConfiguration": [{"AlarmName": "errors"}]})
    up, run = "SystemUpdating", "Running"
    advance(twin, 601)  # batch 1 done with the alarm OK; batch 2 starts (no wait)
    assert state(sm) == (up, "InProgress", [(run, target)] * 2 + [(up, new)] * 2 + [(run, new)])
    advance(twin, 200)
    cw.set_alarm_state(AlarmName="errors", StateValue="ALARM", StateReason="test")
    advance(twin, 61)  # the next check during batch 2 (not its end, 340 s away): the roll back starts now
    assert state(sm) == (up, "RollbackInProgress", [(up, target), (run, target)] + [(up, new)] * 2 + [(run, new)])
    texts = [e["Description"] for e in sm.list_cluster_events(ClusterName=NAME, MaxResults=100)["Events"]]
    assert any("Alarm errors is in ALARM during batch 2/3" in t for t in texts), texts
    advance(twin, 400)  # where batch 2 would have ended: it does not complete, nothing starts
    assert state(sm)[1:] == ("RollbackInProgress", [(up, target), (run, target)] + [(up, new)] * 2 + [(run, new)])
    advance(twin, 200)  # one node at a time (RollbackMaximumBatchSize 1)
    assert state(sm)[1:] == ("RollbackInProgress", [(run, new), (up, target)] + [(up, new)] * 2 + [(run, new)])
    advance(twin, 601)
    advance(twin, 601)
    advance(twin, 601)
    assert state(sm) == ("InService", "RollbackComplete", [(run, new)] * 5)
    cw.set_alarm_state(AlarmName="errors", StateValue="OK", StateReason="test")


@pytest.mark.parametrize(
    ("request_", "needle"),
    [
        ({"InstanceGroups": [{"InstanceGroupName": "workers", "ImageReleaseVersion": "1999.1.1"}]}, "1999.1.1"),
        ({"InstanceGroups": [{"InstanceGroupName": "nope"}]}, "nope"),
    ],
)
def test_refusals(sm: Any, request_: dict[str, Any], needle: str) -> None:
    with pytest.raises(ClientError) as err:
        sm.update_cluster_software(ClusterName=NAME, **request_)
    assert err.value.response["Error"]["Code"] == "ValidationException" and needle in str(err.value)
