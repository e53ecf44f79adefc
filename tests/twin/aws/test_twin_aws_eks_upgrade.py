"""EKS version upgrades on the twin: DescribeAddonVersions serves a version matrix per Kubernetes version,
CreateAddon/UpdateAddon refuse a version that does not run on the cluster's, and UpdateClusterVersion goes one
minor version at a time (InvalidParameterException otherwise), InProgress then Successful on the twin clock."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import Net, advance, build_network

ROLE = "arn:aws:iam::111122223333:role/eks-cluster"


@pytest.fixture(scope="module")
def net(twin: Twin) -> Net:
    return build_network(twin, "10.41")


def _cluster(twin: Twin, net: Net, name: str, version: str) -> Any:
    eks = twin.boto3_client("eks")
    eks.create_cluster(name=name, roleArn=ROLE, version=version,
                       resourcesVpcConfig={"subnetIds": net.eks_private, "securityGroupIds": [net.sg]})
    advance(twin, 601)
    return eks


def _versions(eks: Any, addon: str, k8s: str) -> dict[str, list[dict[str, Any]]]:
    found = eks.describe_addon_versions(addonName=addon, kubernetesVersion=k8s)["addons"][0]["addonVersions"]
    return {v["addonVersion"]: v["compatibilities"] for v in found}


def test_addon_versions_follow_the_kubernetes_version(twin: Twin) -> None:
    eks = twin.boto3_client("eks")
    on_132 = _versions(eks, "kube-proxy", "1.32")
    assert list(on_132) == ["v1.32.6-eksbuild.8"]
    assert on_132["v1.32.6-eksbuild.8"] == [{"clusterVersion": "1.32", "platformVersions": ["*"],
                                             "defaultVersion": True}]
    assert list(_versions(eks, "kube-proxy", "1.33")) == ["v1.33.3-eksbuild.4"]
    coredns_133 = _versions(eks, "coredns", "1.33")
    assert list(coredns_133) == ["v1.12.3-eksbuild.1"]
    coredns_131 = _versions(eks, "coredns", "1.31")
    assert [c["defaultVersion"] for v in coredns_131.values() for c in v] == [True, False]
    # Without a Kubernetes version: every version with each cluster version it runs on.
    every = eks.describe_addon_versions(addonName="coredns")["addons"][0]["addonVersions"]
    old = next(v for v in every if v["addonVersion"] == "v1.11.4-eksbuild.14")
    assert [c["clusterVersion"] for c in old["compatibilities"]] == ["1.28", "1.29", "1.30", "1.31", "1.32"]


def test_addon_version_must_run_on_the_cluster(twin: Twin, net: Net) -> None:
    eks = _cluster(twin, net, "matrix", "1.32")
    with pytest.raises(ClientError) as refused:
        eks.create_addon(clusterName="matrix", addonName="kube-proxy", addonVersion="v1.33.3-eksbuild.4")
    assert refused.value.response["Error"]["Code"] == "InvalidParameterException"
    eks.create_addon(clusterName="matrix", addonName="kube-proxy")
    advance(twin, 61)
    assert eks.describe_addon(clusterName="matrix", addonName="kube-proxy")["addon"]["addonVersion"] == (
        "v1.32.6-eksbuild.8")
    with pytest.raises(ClientError) as refused:
        eks.update_addon(clusterName="matrix", addonName="kube-proxy", addonVersion="v1.34.1-eksbuild.2")
    assert refused.value.response["Error"]["Code"] == "InvalidParameterException"


def test_update_cluster_version_one_minor_at_a_time(twin: Twin, net: Net) -> None:
    eks = _cluster(twin, net, "upgrade", "1.31")
    with pytest.raises(ClientError) as skipped:
        eks.update_cluster_version(name="upgrade", version="1.33")
    error = skipped.value.response["Error"]
    assert error["Code"] == "InvalidParameterException"
    assert error["Message"] == "Unsupported Kubernetes minor version update from 1.31 to 1.33"
    with pytest.raises(ClientError) as same:
        eks.update_cluster_version(name="upgrade", version="1.31")
    assert same.value.response["Error"]["Code"] == "InvalidParameterException"

    update = eks.update_cluster_version(name="upgrade", version="1.32", clientRequestToken="tok-1")["update"]
    assert update["type"] == "VersionUpdate" and update["status"] == "InProgress"
    assert {"type": "Version", "value": "1.32"} in update["params"]
    # The same token is the same update; another update while one runs is refused.
    again = eks.update_cluster_version(name="upgrade", version="1.32", clientRequestToken="tok-1")["update"]
    assert again["id"] == update["id"]
    with pytest.raises(ClientError) as busy:
        eks.update_cluster_version(name="upgrade", version="1.32", clientRequestToken="tok-2")
    assert busy.value.response["Error"]["Code"] == "ResourceInUseException"
    cluster = eks.describe_cluster(name="upgrade")["cluster"]
    assert (cluster["status"], cluster["version"]) == ("UPDATING", "1.31")

    advance(twin, 481)
    done = eks.describe_update(name="upgrade", updateId=update["id"])["update"]
    assert done["status"] == "Successful"
    cluster = eks.describe_cluster(name="upgrade")["cluster"]
    assert (cluster["status"], cluster["version"]) == ("ACTIVE", "1.32")
    assert update["id"] in eks.list_updates(name="upgrade")["updateIds"]
