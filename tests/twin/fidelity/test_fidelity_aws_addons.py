"""EKS add-ons fail the way EKS reports failures: missing prerequisites and no nodes are DEGRADED with a
health issue (and heal by themselves), and scripted faults end a create or an update FAILED."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import Net, advance, build_eks, build_network, control, group

TRAINING = "amazon-sagemaker-hyperpod-training-operator"


@pytest.fixture(scope="module")
def env(aws_twin: Twin) -> Iterator[tuple[Net, str]]:
    """A network and an ACTIVE EKS cluster `addons` (no nodes yet)."""
    net = build_network(aws_twin)
    yield net, build_eks(aws_twin, net, "addons")


@pytest.fixture(autouse=True)
def _no_faults(aws_twin: Twin) -> Iterator[None]:
    yield
    control(aws_twin, "faults", method="DELETE")


def _addon(twin: Twin, name: str, cluster: str = "addons") -> dict[str, Any]:
    found: dict[str, Any] = twin.boto3_client("eks").describe_addon(clusterName=cluster, addonName=name)["addon"]
    return found


def _create(twin: Twin, name: str, cluster: str = "addons") -> dict[str, Any]:
    twin.boto3_client("eks").create_addon(clusterName=cluster, addonName=name)
    advance(twin, 61)
    return _addon(twin, name, cluster)


def test_missing_prerequisite_keeps_the_operator_degraded_until_it_is_installed(
    aws_twin: Twin, env: tuple[Net, str]
) -> None:
    net, eks_arn = env
    operator = _create(aws_twin, TRAINING)
    assert operator["status"] == "DEGRADED"
    issue = operator["health"]["issues"][0]
    assert issue["code"] == "InsufficientNumberOfReplicas"
    assert "cert-manager, eks-pod-identity-agent" in issue["message"]

    # The Pod Identity agent is only a DaemonSet: ACTIVE even before nodes exist.
    assert _create(aws_twin, "eks-pod-identity-agent")["status"] == "ACTIVE"
    # cert-manager runs Deployments: with no node to run them it is DEGRADED too.
    cert = _create(aws_twin, "cert-manager")
    assert cert["status"] == "DEGRADED" and cert["health"]["issues"][0]["code"] == "InsufficientNumberOfReplicas"
    operator = _addon(aws_twin, TRAINING)
    assert operator["status"] == "DEGRADED" and "not installed" not in operator["health"]["issues"][0]["message"]

    # Nodes join: everything settles ACTIVE with no issues, without any call to the add-ons.
    sm = aws_twin.boto3_client("sagemaker")
    sm.create_cluster(
        ClusterName="addon-nodes",
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[group("cpu", "ml.m5.2xlarge", 1)],
    )
    advance(aws_twin, 900)
    for name in ("cert-manager", TRAINING):
        settled = _addon(aws_twin, name)
        assert (settled["status"], settled["health"]["issues"]) == ("ACTIVE", [])

    # Removing cert-manager degrades the operator again, naming what is missing.
    aws_twin.boto3_client("eks").delete_addon(clusterName="addons", addonName="cert-manager")
    advance(aws_twin, 31)
    operator = _addon(aws_twin, TRAINING)
    assert operator["status"] == "DEGRADED" and "cert-manager" in operator["health"]["issues"][0]["message"]


@pytest.mark.parametrize("outcome", ["CREATE_FAILED", "DEGRADED"])
def test_scripted_create_outcomes(aws_twin: Twin, env: tuple[Net, str], outcome: str) -> None:
    control(aws_twin, "faults", {"kind": "addon_failure", "addon": "aws-fsx-csi-driver", "outcome": outcome,
                                 "code": "AccessDenied", "message": "scripted"})
    addon = _create(aws_twin, "aws-fsx-csi-driver")
    assert addon["status"] == outcome
    assert addon["health"]["issues"] == [{"code": "AccessDenied", "message": "scripted",
                                          "resourceIds": ["aws-fsx-csi-driver"]}]
    aws_twin.boto3_client("eks").delete_addon(clusterName="addons", addonName="aws-fsx-csi-driver")
    advance(aws_twin, 31)


def test_scripted_update_failure_keeps_the_old_version(aws_twin: Twin, env: tuple[Net, str]) -> None:
    eks = aws_twin.boto3_client("eks")
    before = _create(aws_twin, "metrics-server")["addonVersion"]
    control(aws_twin, "faults", {"kind": "addon_failure", "addon": "metrics-server", "outcome": "UPDATE_FAILED"})
    update = eks.update_addon(clusterName="addons", addonName="metrics-server", addonVersion="v0.7.2-eksbuild.4")
    advance(aws_twin, 46)
    addon = _addon(aws_twin, "metrics-server")
    assert addon["status"] == "UPDATE_FAILED" and addon["addonVersion"] == before
    assert addon["health"]["issues"][0]["code"] == "ConfigurationConflict"
    described = eks.describe_update(name="addons", updateId=update["update"]["id"], addonName="metrics-server")
    assert described["update"]["status"] == "Failed" and described["update"]["errors"]


def test_fault_specs_are_checked(aws_twin: Twin) -> None:
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as info:
        control(aws_twin, "faults", {"kind": "addon_failure", "addon": "x", "outcome": "BROKEN"})
    assert info.value.code == 400


def test_scripted_eks_failure(aws_twin: Twin, env: tuple[Net, str]) -> None:
    net, _ = env
    control(aws_twin, "faults", {"kind": "eks_failure", "cluster": "doomed"})
    eks = aws_twin.boto3_client("eks")
    eks.create_cluster(name="doomed", roleArn="arn:aws:iam::111122223333:role/eks-cluster",
                       resourcesVpcConfig={"subnetIds": net.eks_private, "securityGroupIds": [net.sg]})
    advance(aws_twin, 601)
    cluster = eks.describe_cluster(name="doomed")["cluster"]
    assert cluster["status"] == "FAILED" and "endpoint" not in cluster
    assert cluster["health"]["issues"][0]["code"] == "Ec2SubnetInvalidConfiguration"


def test_eks_refuses_a_cluster_role_that_does_not_exist(aws_twin: Twin, env: tuple[Net, str]) -> None:
    net, _ = env
    eks = aws_twin.boto3_client("eks")
    with pytest.raises(eks.exceptions.InvalidParameterException) as info:
        eks.create_cluster(name="no-role", roleArn="arn:aws:iam::111122223333:role/ghost",
                           resourcesVpcConfig={"subnetIds": net.eks_private, "securityGroupIds": [net.sg]})
    assert "ghost" in str(info.value)
