"""The cluster base: typed facts over the stored details JSON, and the operation target of a cluster."""

from __future__ import annotations

import pytest

from instantstart.errors import PreconditionFailed
from instantstart.services.base.facts import ClusterFacts, stored_changes
from instantstart.services.base.target import OperationTarget, cluster_of, cluster_target

STORED = {
    "vpcId": "vpc-1", "securityGroupId": "sg-1", "computeSubnets": {"us-west-2a": "subnet-a"},
    "eksClusterArn": "arn:aws:eks:us-west-2:111122223333:cluster/x", "bucket": "b",
    "storage": {"s3-claim": {"bucketName": "b", "prefix": "p/"}}, "karpenter": None,
    "instanceGroups": ["accel"], "kubernetesVersion": "1.31", "network": {"natGatewayId": "nat-1"},
}


def test_a_stored_row_reads_unchanged_and_writes_back_the_same_keys() -> None:
    facts = ClusterFacts.model_validate(STORED)
    assert (facts.vpc_id, facts.bucket, facts.any_compute_subnet) == ("vpc-1", "b", "subnet-a")
    assert facts.karpenter == {} and facts.group_records() == {}  # null and an imported name list
    stored = facts.stored()
    assert {k: v for k, v in STORED.items() if k != "karpenter"} == stored  # extras kept, keys unchanged


def test_changes_are_stored_under_the_old_keys_and_typed() -> None:
    assert stored_changes({"compute_subnets": {"a": "s"}, "kubernetesVersion": "1.31"}) == {
        "computeSubnets": {"a": "s"}, "kubernetesVersion": "1.31"}
    with pytest.raises(ValueError):
        stored_changes({"storage": "not a map"})


def test_a_missing_fact_names_its_stored_key() -> None:
    facts = ClusterFacts(bucket="b")
    assert facts.missing("vpc_id", "bucket") == ["vpcId"]
    with pytest.raises(PreconditionFailed) as err:
        facts.need("execution_role_arn")
    assert err.value.details == {"fact": "executionRoleArn"}


def test_the_operation_target_is_built_and_parsed_in_one_place() -> None:
    assert cluster_target("demo") == "cluster:demo" == str(OperationTarget("demo"))
    assert cluster_of("cluster:demo") == "demo"
    assert cluster_of("state:active-cluster") is None and cluster_of(None) is None
