"""Typed params of the cluster-domain kinds: what earlier versions stored still loads, key for key."""

from __future__ import annotations

from typing import Any

import pytest

from instantstart.errors import InvalidInput
from instantstart.operations.kinds import KINDS, OpenParams
from instantstart.operations.params import params_for_load, params_for_submit, params_to_store
from instantstart.services import load_all
from instantstart.services.base.params import (
    ClusterParams,
    CreateParams,
    DeleteParams,
    EksParams,
    HyperPodParams,
    StorageParams,
    VerificationParams,
)

load_all()

WHERE = {"clusterTag": "demo", "region": "us-west-2"}
NETWORK = {"vpcCidr": None, "vpcId": None, "kubernetesVersion": None}
HYPERPOD = {
    "groupName": "accelerated-demo",
    "instanceType": "ml.g6.4xlarge",
    "count": 1,
    "availabilityZone": "us-west-2c",
    "ebsGb": 500,
    "trainingPlanArn": None,
    "subnetId": None,
    "capacityType": "OnDemand",
    "threadsPerCore": 1,
    "deepHealthChecks": [],
}
PLAN = {
    "vpc": "10.78.0.0/16",
    "public": ["10.78.0.0/24", "10.78.1.0/24"],
    "eks_private": ["10.78.2.0/24", "10.78.3.0/24"],
    "compute": "10.78.16.0/20",
}
STEP = {
    "order": 1,
    "resourceType": "ec2:vpc",
    "resourceId": "vpc-0123456789abcdef0",
    "region": "us-west-2",
    "source": "ledger",
    "keep": False,
    "details": {"cidr": "10.78.0.0/16"},
}
# The params each kind's service submitted before the kinds were typed, key for key.
STORED: dict[str, list[dict[str, Any]]] = {
    "cluster_create_eks": [
        {**WHERE, **NETWORK},
        {**WHERE, **NETWORK, "vpcCidr": "10.78.0.0/16", "plan": PLAN},
    ],
    "hyperpod_create": [{**WHERE, "hyperpod": HYPERPOD}],
    "cluster_create": [{**WHERE, **NETWORK, "hyperpod": HYPERPOD, "storage": {"name": "s3-claim"}}],
    "cluster_configure_dependencies": [dict(WHERE)],
    "s3_storage_create": [
        {**WHERE, "storage": {"name": "s3-claim", "bucketName": "bucket-demo", "region": "us-west-2"}},
        {**WHERE, "storage": {"name": "data", "bucketName": "b", "region": "us-east-1", "prefix": "runs/"}},
    ],
    "cluster_import": [{**WHERE, "eksClusterName": "eks-cluster-demo"}],
    "cluster_delete": [{"clusterTag": "demo", "deleteBucket": False, "plan": [STEP]}],
}


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


CASES = [(kind, i) for kind, stored in sorted(STORED.items()) for i in range(len(stored))]


@pytest.mark.parametrize(("kind", "case"), CASES)
def test_stored_params_load_and_round_trip(kind: str, case: int) -> None:
    stored = STORED[kind][case]
    registered = KINDS.get(kind)
    assert registered is not None
    assert registered.params is not OpenParams, f"{kind} declares no params model"
    loaded = params_for_load(registered.params, kind, "op-0001", stored)
    assert loaded.model_dump(mode="json", by_alias=True, exclude_unset=True) == stored
    resubmitted = params_to_store(registered.params, kind, params_for_submit(registered.params, kind, stored))
    # Submitting again adds only the optional keys left out, as null.
    assert _no_nulls(resubmitted) == _no_nulls(stored)
    assert params_for_load(registered.params, kind, "op-0002", resubmitted) == loaded


@pytest.mark.parametrize("kind", sorted(STORED))
def test_unknown_or_missing_keys_are_refused(kind: str) -> None:
    registered = KINDS.get(kind)
    assert registered is not None
    stored = STORED[kind][0]
    with pytest.raises(InvalidInput, match="surprise"):
        params_for_load(registered.params, kind, "op-0001", {**stored, "surprise": 1})
    with pytest.raises(InvalidInput, match="clusterTag"):
        params_for_load(registered.params, kind, "op-0001", {k: v for k, v in stored.items() if k != "clusterTag"})


def test_every_stage_of_cluster_create_reads_its_own_model() -> None:
    """cluster_create runs the EKS, dependencies, HyperPod, storage and verification stages: its params
    must be an instance of each stage's model (params_as checks with isinstance)."""
    loaded = CreateParams.model_validate(STORED["cluster_create"][0])
    for model in (EksParams, ClusterParams, HyperPodParams, StorageParams, VerificationParams):
        assert isinstance(loaded, model)
    assert loaded.hyperpod.threads_per_core == 1 and loaded.storage is not None and loaded.storage.name == "s3-claim"
    assert loaded.plan is None and loaded.verify_wait_seconds is None


def test_nested_values_are_typed() -> None:
    bad = {**WHERE, "hyperpod": {**HYPERPOD, "count": "many"}}
    with pytest.raises(InvalidInput, match=r"hyperpod\.count"):
        params_for_load(HyperPodParams, "hyperpod_create", "op-0001", bad)
    plan = EksParams.model_validate(STORED["cluster_create_eks"][1]).plan
    assert plan is not None and plan.eks_private == PLAN["eks_private"]
    step = DeleteParams.model_validate(STORED["cluster_delete"][0]).plan[0]
    assert (step.resource_type, step.resource_id, step.order) == ("ec2:vpc", "vpc-0123456789abcdef0", 1)
