"""The software update's request as UpdateClusterSoftware takes it, and the batch arithmetic the plan uses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from instantstart.services.capacity.software.models import SoftwareRequest, api_request, batch_size, batches
from instantstart.services.capacity.software.plan import interrupted, update_order


def test_the_request_becomes_the_apis_shape() -> None:
    req = SoftwareRequest.model_validate({
        "instanceGroups": [{"instanceGroupName": "workers", "imageReleaseVersion": "2026.01.15"}],
        "deploymentConfig": {
            "rollingUpdatePolicy": {"maximumBatchSize": {"type": "CAPACITY_PERCENTAGE", "value": 25},
                                    "rollbackMaximumBatchSize": {"type": "INSTANCE_COUNT", "value": 1}},
            "waitIntervalInSeconds": 300,
            "autoRollbackConfiguration": [{"alarmName": "xid-errors"}],
        },
    })
    assert api_request(req) == {
        "InstanceGroups": [{"InstanceGroupName": "workers", "ImageReleaseVersion": "2026.01.15"}],
        "DeploymentConfig": {
            "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "CAPACITY_PERCENTAGE", "Value": 25},
                                    "RollbackMaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1}},
            "WaitIntervalInSeconds": 300,
            "AutoRollbackConfiguration": [{"AlarmName": "xid-errors"}],
        },
    }
    assert api_request(SoftwareRequest()) == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"deploymentConfig": {"rollingUpdatePolicy": {"maximumBatchSize": {"type": "NODES", "value": 2}}}}, "type"),
        ({"deploymentConfig": {"rollingUpdatePolicy": {"maximumBatchSize": {"type": "INSTANCE_COUNT", "value": 0}}}},
         "value"),
        ({"deploymentConfig": {"waitIntervalInSeconds": 3601}}, "waitIntervalInSeconds"),
        ({"deploymentConfig": {"autoRollbackConfiguration": []}}, "autoRollbackConfiguration"),
        ({"instanceGroups": [{"instanceGroupName": "w", "imageReleaseVersion": "latest"}]}, "imageReleaseVersion"),
    ],
)
def test_what_the_api_refuses_is_refused_naming_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        SoftwareRequest.model_validate(body)
    assert field in str(err.value)


def test_batches_and_their_order() -> None:
    assert batch_size({"Type": "CAPACITY_PERCENTAGE", "Value": 34}, 6) == 2
    assert batch_size({"Type": "CAPACITY_PERCENTAGE", "Value": 5}, 6) == 1
    assert batches(list("abcdef"), {"Type": "INSTANCE_COUNT", "Value": 4}) == [list("abcd"), list("ef")]
    assert batches(list("abc"), None) == [list("abc")]
    nodes = [
        {"InstanceId": "i-b", "LaunchTime": 10.0001, "InstanceStatus": {"Status": "Running"}},
        {"InstanceId": "i-a", "LaunchTime": 10.0002, "InstanceStatus": {"Status": "Running"}},
        {"InstanceId": "i-0", "LaunchTime": 5.0, "InstanceStatus": {"Status": "Pending"}},
        {"InstanceId": "i-c", "LaunchTime": 9.0, "InstanceStatus": {"Status": "Running"}},
    ]
    assert update_order(nodes) == ["i-c", "i-a", "i-b"]  # same millisecond: by id; not Running: not updated


def test_what_a_drain_interrupts() -> None:
    def pod(name: str, labels: dict[str, str], owner: str = "ReplicaSet") -> dict[str, object]:
        return {"metadata": {"name": name, "namespace": "ml", "labels": labels,
                             "ownerReferences": [{"kind": owner, "name": "x"}]}}

    pods = [
        pod("train-0", {"HPJob": "llama"}), pod("train-1", {"HPJob": "llama"}),
        pod("ray-head", {"ray.io/cluster": "rc"}), pod("job-1", {"batch.kubernetes.io/job-name": "bench"}, "Job"),
        pod("qwen-7d9", {"instantstart.io/engine": "vllm", "app.kubernetes.io/name": "qwen"}),
        pod("dcgm", {}, "DaemonSet"), pod("web", {}),
    ]
    assert interrupted(pods) == (["HyperPodPyTorchJob ml/llama", "Job ml/bench", "RayCluster ml/rc"], ["ml/qwen"], 1)
