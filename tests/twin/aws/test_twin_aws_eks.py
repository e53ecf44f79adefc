"""EKS through boto3: CREATING→ACTIVE with the API server endpoint, add-ons, access entries, pod identity."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import Net, advance, build_network, ensure_execution_role

ROLE = "arn:aws:iam::111122223333:role/eks-cluster"


@pytest.fixture(scope="module")
def net(twin: Twin) -> Net:
    return build_network(twin, "10.40")


@pytest.fixture(scope="module")
def events(twin: Twin) -> list[tuple[str, dict[str, Any]]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    for topic in ("eks.cluster.deleted", "eks.addon.active", "eks.access_entries.changed", "eks.pod_identity.changed"):
        twin.bus.subscribe(topic, lambda topic=topic, **kw: seen.append((topic, kw)))

    def activating(name: str, arn: str, region: str, **_more: Any) -> tuple[str, str] | None:
        seen.append(("eks.cluster.activating", {"name": name, "arn": arn, "region": region}))
        return ("https://127.0.0.1:6443", "Q0EtREFUQQ==") if name.startswith("served") else None

    twin.bus.subscribe("eks.cluster.activating", activating)
    return seen


def create(twin: Twin, net: Net, name: str, **extra: Any) -> dict[str, Any]:
    cluster: dict[str, Any] = twin.boto3_client("eks").create_cluster(
        name=name,
        roleArn=ROLE,
        version="1.32",
        resourcesVpcConfig={"subnetIds": net.eks_private, "securityGroupIds": [net.sg], "endpointPrivateAccess": True},
        **extra,
    )["cluster"]
    return cluster


def test_cluster_goes_active_with_the_endpoint_a_handler_gives(twin: Twin, net: Net, events: list[Any]) -> None:
    eks = twin.boto3_client("eks")
    created = create(twin, net, "served-1", accessConfig={"authenticationMode": "API"})
    assert created["status"] == "CREATING" and "endpoint" not in created
    advance(twin, 300)
    assert eks.describe_cluster(name="served-1")["cluster"]["status"] == "CREATING"
    with pytest.raises(ClientError) as err:
        eks.create_addon(clusterName="served-1", addonName="cert-manager")
    assert err.value.response["Error"]["Code"] == "InvalidRequestException"
    advance(twin, 301)
    cluster = eks.describe_cluster(name="served-1")["cluster"]
    assert cluster["status"] == "ACTIVE"
    assert cluster["endpoint"] == "https://127.0.0.1:6443"
    assert cluster["certificateAuthority"]["data"] == "Q0EtREFUQQ=="
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    assert cluster["version"] == "1.32"
    assert cluster["identity"]["oidc"]["issuer"].startswith("https://oidc.eks.us-west-2.amazonaws.com/id/")
    vpc = cluster["resourcesVpcConfig"]
    assert vpc["vpcId"] == net.vpc and vpc["subnetIds"] == net.eks_private and vpc["securityGroupIds"] == [net.sg]
    assert vpc["endpointPrivateAccess"] is True and vpc["endpointPublicAccess"] is True
    assert vpc["clusterSecurityGroupId"].startswith("sg-")
    assert cluster["kubernetesNetworkConfig"]["serviceIpv4Cidr"] == "172.20.0.0/16"
    activating = [kw for t, kw in events if t == "eks.cluster.activating" and kw["name"] == "served-1"]
    assert activating == [{"name": "served-1", "arn": cluster["arn"], "region": "us-west-2"}]
    # The creator gets cluster-admin through an access entry (bootstrapClusterCreatorAdminPermissions).
    assert eks.list_access_entries(clusterName="served-1")["accessEntries"] == [twin.caller_arn]
    policies = eks.list_associated_access_policies(clusterName="served-1", principalArn=twin.caller_arn)
    assert policies["associatedAccessPolicies"][0]["policyArn"].endswith("/AmazonEKSClusterAdminPolicy")


def test_without_a_handler_no_endpoint_is_invented(twin: Twin, net: Net) -> None:
    create(twin, net, "bare-1")
    advance(twin, 601)
    cluster = twin.boto3_client("eks").describe_cluster(name="bare-1")["cluster"]
    assert cluster["status"] == "ACTIVE" and "endpoint" not in cluster
    assert cluster["accessConfig"]["authenticationMode"] == "CONFIG_MAP"


def test_subnets_in_one_az_are_refused(twin: Twin, net: Net) -> None:
    with pytest.raises(ClientError) as err:
        twin.boto3_client("eks").create_cluster(
            name="one-az", roleArn=ROLE, resourcesVpcConfig={"subnetIds": [net.eks_private[0], net.public[0]]}
        )
    assert err.value.response["Error"]["Code"] == "InvalidParameterException"


def test_addons_versions_and_lifecycle(twin: Twin, net: Net, events: list[Any]) -> None:
    eks = twin.boto3_client("eks")
    names = [
        "eks-pod-identity-agent",
        "aws-mountpoint-s3-csi-driver",
        "aws-fsx-csi-driver",
        "metrics-server",
        "cert-manager",
        "amazon-sagemaker-hyperpod-training-operator",
        "amazon-sagemaker-hyperpod-inference",
        "amazon-sagemaker-hyperpod-observability",
    ]
    for name in names:
        info = eks.describe_addon_versions(addonName=name, kubernetesVersion="1.32")["addons"]
        assert info[0]["addonName"] == name
        versions = info[0]["addonVersions"]
        assert versions[0]["compatibilities"][0] == {
            "clusterVersion": "1.32",
            "platformVersions": ["*"],
            "defaultVersion": True,
        }
    create(twin, net, "served-addons", accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
    advance(twin, 601)
    addon = eks.create_addon(
        clusterName="served-addons",
        addonName="amazon-sagemaker-hyperpod-inference",
        configurationValues='{"executionRoleArn": "arn:aws:iam::111122223333:role/inf"}',
        podIdentityAssociations=[{"serviceAccount": "hyperpod-inference-controller-manager", "roleArn": ROLE}],
    )["addon"]
    assert addon["status"] == "CREATING" and addon["addonVersion"] == "v1.1.0-eksbuild.1"
    with pytest.raises(ClientError) as err:
        eks.create_addon(clusterName="served-addons", addonName="amazon-sagemaker-hyperpod-inference")
    assert err.value.response["Error"]["Code"] == "ResourceInUseException"
    with pytest.raises(ClientError) as err:
        eks.create_addon(clusterName="served-addons", addonName="cert-manager", addonVersion="v0.0.1")
    assert err.value.response["Error"]["Code"] == "InvalidParameterException"
    advance(twin, 61)
    # Installed without its prerequisite add-ons and with no nodes: DEGRADED, as EKS reports it.
    settled = eks.describe_addon(clusterName="served-addons", addonName="amazon-sagemaker-hyperpod-inference")
    assert settled["addon"]["status"] == "DEGRADED"
    assert "cert-manager" in settled["addon"]["health"]["issues"][0]["message"]
    active = [kw for t, kw in events if t == "eks.addon.active" and kw["cluster_name"] == "served-addons"]
    assert active[0]["addon_name"] == "amazon-sagemaker-hyperpod-inference"
    assert active[0]["namespace"] == "hyperpod-inference-system"
    assoc = eks.list_pod_identity_associations(clusterName="served-addons")["associations"]
    assert assoc[0]["namespace"] == "hyperpod-inference-system" and assoc[0]["ownerArn"] == addon["addonArn"]
    update = eks.update_addon(
        clusterName="served-addons", addonName="amazon-sagemaker-hyperpod-inference", addonVersion="v1.0.0-eksbuild.1"
    )
    assert update["update"]["status"] == "InProgress"
    advance(twin, 46)
    described = eks.describe_update(
        name="served-addons", updateId=update["update"]["id"], addonName="amazon-sagemaker-hyperpod-inference"
    )
    assert described["update"]["status"] == "Successful"
    eks.delete_addon(clusterName="served-addons", addonName="amazon-sagemaker-hyperpod-inference")
    advance(twin, 31)
    assert eks.list_addons(clusterName="served-addons")["addons"] == []
    assert eks.list_pod_identity_associations(clusterName="served-addons")["associations"] == []


def test_access_entries_policies_and_modes(twin: Twin, net: Net, events: list[Any]) -> None:
    eks = twin.boto3_client("eks")
    create(twin, net, "served-access")
    advance(twin, 601)
    # A CONFIG_MAP cluster publishes no access entries (aws-auth decides).
    assert not [kw for t, kw in events if t == "eks.access_entries.changed" and kw["cluster_name"] == "served-access"]
    principal = "arn:aws:iam::111122223333:role/operator"
    with pytest.raises(ClientError) as err:
        eks.create_access_entry(clusterName="served-access", principalArn=principal)
    assert err.value.response["Error"]["Code"] == "InvalidRequestException"
    update = eks.update_cluster_config(name="served-access", accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
    assert eks.describe_cluster(name="served-access")["cluster"]["status"] == "UPDATING"
    advance(twin, 121)
    assert (
        eks.describe_update(name="served-access", updateId=update["update"]["id"])["update"]["status"] == "Successful"
    )
    cluster = eks.describe_cluster(name="served-access")["cluster"]
    assert cluster["status"] == "ACTIVE" and cluster["accessConfig"]["authenticationMode"] == "API_AND_CONFIG_MAP"
    # Turning access entries on keeps the creator's administrator access as an entry.
    assert eks.list_access_entries(clusterName="served-access")["accessEntries"] == [twin.caller_arn]
    entry = eks.create_access_entry(clusterName="served-access", principalArn=principal, kubernetesGroups=["ops"])
    assert entry["accessEntry"]["type"] == "STANDARD"
    eks.associate_access_policy(
        clusterName="served-access",
        principalArn=principal,
        policyArn="arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
        accessScope={"type": "cluster"},
    )
    node_role = ensure_execution_role(twin)
    eks.create_access_entry(clusterName="served-access", principalArn=node_role, type="HYPERPOD_LINUX")
    with pytest.raises(ClientError) as err:
        eks.associate_access_policy(
            clusterName="served-access",
            principalArn=node_role,
            policyArn="arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
            accessScope={"type": "cluster"},
        )
    assert err.value.response["Error"]["Code"] == "InvalidRequestException"
    latest = [kw for t, kw in events if t == "eks.access_entries.changed" and kw["cluster_name"] == "served-access"][-1]
    by_arn = {e["principalArn"]: e for e in latest["entries"]}
    assert by_arn[principal]["kubernetesGroups"] == ["ops"]
    assert by_arn[principal]["username"] == "arn:aws:sts::111122223333:assumed-role/operator/{{SessionName}}"
    assert by_arn[principal]["accessPolicies"][0]["policyArn"].endswith("AmazonEKSClusterAdminPolicy")
    assert by_arn[node_role]["username"] == "system:node:{{EC2PrivateDNSName}}"
    with pytest.raises(ClientError) as err:
        eks.update_cluster_config(name="served-access", accessConfig={"authenticationMode": "CONFIG_MAP"})
    assert err.value.response["Error"]["Code"] == "InvalidParameterException"
    pia = eks.create_pod_identity_association(
        clusterName="served-access",
        namespace="aws-hyperpod",
        serviceAccount="hp-training-operator-controller-manager",
        roleArn=ROLE,
    )["association"]
    got = eks.describe_pod_identity_association(clusterName="served-access", associationId=pia["associationId"])
    assert got["association"]["roleArn"] == ROLE
    with pytest.raises(ClientError) as err:
        eks.create_pod_identity_association(
            clusterName="served-access",
            namespace="aws-hyperpod",
            serviceAccount="hp-training-operator-controller-manager",
            roleArn=ROLE,
        )
    assert err.value.response["Error"]["Code"] == "ResourceInUseException"


def test_nodegroups_and_deletion(twin: Twin, net: Net, events: list[Any]) -> None:
    eks = twin.boto3_client("eks")
    create(twin, net, "served-del")
    with pytest.raises(ClientError):
        eks.create_nodegroup(clusterName="served-del", nodegroupName="ng", subnets=net.eks_private, nodeRole=ROLE)
    advance(twin, 601)
    eks.create_nodegroup(
        clusterName="served-del",
        nodegroupName="ng",
        subnets=net.eks_private,
        nodeRole=ROLE,
        scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 2},
    )
    eks.update_nodegroup_config(
        clusterName="served-del", nodegroupName="ng", scalingConfig={"minSize": 0, "maxSize": 3, "desiredSize": 0}
    )
    with pytest.raises(ClientError) as err:
        eks.delete_cluster(name="served-del")
    assert err.value.response["Error"]["Code"] == "ResourceInUseException"
    eks.delete_nodegroup(clusterName="served-del", nodegroupName="ng")
    assert eks.delete_cluster(name="served-del")["cluster"]["status"] == "DELETING"
    assert eks.describe_cluster(name="served-del")["cluster"]["status"] == "DELETING"
    advance(twin, 301)
    with pytest.raises(ClientError) as err:
        eks.describe_cluster(name="served-del")
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert (
        "eks.cluster.deleted",
        {"name": "served-del", "arn": "arn:aws:eks:us-west-2:111122223333:cluster/served-del"},
    ) in events


def test_cluster_versions_and_unsupported_version(twin: Twin, net: Net) -> None:
    eks = twin.boto3_client("eks")
    versions = eks.describe_cluster_versions()["clusterVersions"]
    assert [v["clusterVersion"] for v in versions if v["defaultVersion"]] == ["1.33"]
    with pytest.raises(ClientError) as err:
        eks.create_cluster(name="old", roleArn=ROLE, version="1.20", resourcesVpcConfig={"subnetIds": net.eks_private})
    assert err.value.response["Error"]["Code"] == "InvalidParameterException"
