"""The twin's SageMaker task governance APIs through boto3: cluster scheduler configs and compute quotas, their
versions, the one-per-cluster and one-per-team rules, the model's constraints, and the published governance."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import build_eks, build_network, group


@pytest.fixture(scope="module")
def cluster_arn(twin: Twin) -> str:
    net = build_network(twin, "10.60")
    eks_arn = build_eks(twin, net, "gov-eks")
    sm = twin.boto3_client("sagemaker")
    arn: str = sm.create_cluster(
        ClusterName="gov", Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[group("gpu", "ml.g5.12xlarge", 1)],
    )["ClusterArn"]
    return arn


def _config(team: str, gpus: int) -> dict[str, Any]:
    return {"ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.g5.12xlarge", "Accelerators": gpus}],
                                   "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 100}},
            "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": 10}}


def test_scheduler_config_and_quotas(twin: Twin, cluster_arn: str) -> None:
    seen: list[dict[str, Any]] = []
    twin.bus.subscribe("hyperpod.governance.changed", lambda **kw: seen.append(kw))
    sm = twin.boto3_client("sagemaker")
    created = sm.create_cluster_scheduler_config(
        Name="policy", ClusterArn=cluster_arn,
        SchedulerConfig={"PriorityClasses": [{"Name": "training", "Weight": 50}], "FairShare": "Enabled"})
    config_id = created["ClusterSchedulerConfigId"]
    assert created["ClusterSchedulerConfigArn"].endswith(f":cluster-scheduler-config/{config_id}")
    with pytest.raises(ClientError) as again:
        sm.create_cluster_scheduler_config(Name="second", ClusterArn=cluster_arn, SchedulerConfig={})
    assert again.value.response["Error"]["Code"] == "ConflictException"
    quota_id = sm.create_compute_quota(Name="team-a", ClusterArn=cluster_arn, **_config("a", 2))["ComputeQuotaId"]
    described = sm.describe_compute_quota(ComputeQuotaId=quota_id)
    assert described["Status"] == "Created" and described["ActivationState"] == "Enabled"
    assert described["ComputeQuotaVersion"] == 1 and described["ComputeQuotaTarget"]["TeamName"] == "a"
    with pytest.raises(ClientError) as same_team:
        sm.create_compute_quota(Name="team-a-2", ClusterArn=cluster_arn, **_config("a", 1))
    assert same_team.value.response["Error"]["Code"] == "ConflictException"
    with pytest.raises(ClientError) as stale:
        sm.update_compute_quota(ComputeQuotaId=quota_id, TargetVersion=7, **_config("a", 3))
    assert "current version 1" in stale.value.response["Error"]["Message"]
    updated = sm.update_compute_quota(ComputeQuotaId=quota_id, TargetVersion=1, **_config("a", 3))
    assert updated["ComputeQuotaVersion"] == 2
    old = sm.describe_compute_quota(ComputeQuotaId=quota_id, ComputeQuotaVersion=1)
    assert old["ComputeQuotaConfig"]["ComputeQuotaResources"][0]["Accelerators"] == 2
    assert sm.describe_compute_quota(ComputeQuotaId=quota_id)["Status"] == "Updated"
    listed = sm.list_compute_quotas(ClusterArn=cluster_arn)["ComputeQuotaSummaries"]
    assert [q["ComputeQuotaId"] for q in listed] == [quota_id]
    assert sm.list_cluster_scheduler_configs(ClusterArn=cluster_arn)["ClusterSchedulerConfigSummaries"][0][
        "ClusterSchedulerConfigId"] == config_id
    last = seen[-1]
    assert last["cluster_arn"] == cluster_arn and last["eks_cluster_arn"].endswith(":cluster/gov-eks")
    assert last["scheduler"]["SchedulerConfig"]["PriorityClasses"] == [{"Name": "training", "Weight": 50}]
    assert [q["ComputeQuotaTarget"]["TeamName"] for q in last["quotas"]] == ["a"]
    sm.delete_compute_quota(ComputeQuotaId=quota_id)
    assert seen[-1]["quotas"] == []
    with pytest.raises(ClientError) as gone:
        sm.describe_compute_quota(ComputeQuotaId=quota_id)
    assert gone.value.response["Error"]["Code"] == "ResourceNotFound"
    sm.delete_cluster_scheduler_config(ClusterSchedulerConfigId=config_id)


def test_model_constraints_refused_before_the_handler(twin: Twin, cluster_arn: str) -> None:
    sm = twin.boto3_client("sagemaker")
    bad = _config("Team_A", 2)
    bad["ComputeQuotaConfig"]["ResourceSharingConfig"]["Strategy"] = "Share"
    with pytest.raises(ClientError) as refused:
        sm.create_compute_quota(Name="bad", ClusterArn=cluster_arn, **bad)
    message = refused.value.response["Error"]["Message"]
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "Member must satisfy enum value set: [Lend, DontLend, LendAndBorrow]" in message
    with pytest.raises(ClientError) as missing:
        sm.create_compute_quota(Name="x", ClusterArn=cluster_arn.replace(cluster_arn[-12:], "zzzzzzzzzzzz"),
                                **_config("x", 1))
    assert missing.value.response["Error"]["Code"] == "ResourceNotFound"
