"""training_job_submit and training_recipe_submit default instanceType to the cluster's one accelerated instance type,
and refuse naming the types when the cluster has several."""

from __future__ import annotations

from typing import Any

from tests.support.flows import add_group, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running

TAG = "itdef1"
JOB = {"jobName": "no-type", "image": "example/train:1", "command": "train.py"}


def test_the_only_accelerated_type_is_the_default_and_several_are_named(cp: Running) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)  # one group: ml.g6.4xlarge
    [enable] = mcp_calls(cp, [("hyperpod_update_advanced_features", {"trainingOperator": {"enabled": True}})])
    assert mcp_wait(cp, enable["operationId"])["status"] == "SUCCEEDED"

    [submitted] = mcp_calls(cp, [("training_job_submit", JOB)])
    assert mcp_wait(cp, submitted["operationId"])["status"] == "SUCCEEDED"
    [status] = mcp_calls(cp, [("job_get_status", {"jobName": "no-type"})])
    assert status["job"]["instanceType"] == "ml.g6.4xlarge", status

    with cp.client() as client:
        spot = add_group(client, instanceGroupName="more-g", instanceType="ml.g6.8xlarge", instanceCount=0,
                         availabilityZone="us-west-2c", isSpot=True)
        assert spot["status"] == "SUCCEEDED", spot
    calls: list[tuple[str, dict[str, Any]]] = [
        ("training_job_submit", {**JOB, "jobName": "two-types"}),
        ("training_recipe_submit", {"recipe": "pytorch", "jobName": "two-types-r"}),
    ]
    for refused in mcp_raw(cp, calls)[:2]:
        error = refused["payload"]["error"]
        assert refused["isError"] and error["code"] == "INVALID_INPUT", refused
        assert error["details"]["fields"][0]["field"] == "instanceType"
        assert "ml.g6.4xlarge, ml.g6.8xlarge" in error["message"], error
