"""HyperPod through boto3: two groups (Spot, efa-only) Creating→InService, scaling, reboot, replace, refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import Net, advance, build_eks, build_network, control, group

Events = list[tuple[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def env(twin: Twin) -> tuple[Net, str]:
    net = build_network(twin, "10.50")
    return net, build_eks(twin, net, "hp-eks")


@pytest.fixture(scope="module")
def events(twin: Twin) -> Events:
    seen: Events = []
    for topic in (
        "hyperpod.node.changed",
        "hyperpod.node.removed",
        "hyperpod.node.health",
        "hyperpod.cluster.deleted",
        "hyperpod.cluster.changed",
    ):
        twin.bus.subscribe(topic, lambda topic=topic, **kw: seen.append((topic, kw)))
    return seen


def spot_group(net: Net, count: int = 2, **extra: Any) -> dict[str, Any]:
    return group(
        "spot",
        "ml.g5.8xlarge",
        count,
        CapacityRequirements={"Spot": {}},
        OverrideVpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        KubernetesConfig={"Labels": {"team": "a"}, "Taints": [{"Key": "gpu", "Value": "true", "Effect": "NoSchedule"}]},
        InstanceStorageConfigs=[{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
        **extra,
    )


def efa_group(net: Net, count: int = 2, interface: str = "efa-only") -> dict[str, Any]:
    return group(
        "efa",
        "ml.p5.48xlarge",
        count,
        NetworkInterface={"InterfaceType": interface},
        OnStartDeepHealthChecks=["InstanceStress", "InstanceConnectivity"],
        OverrideVpcConfig={"Subnets": [net.compute["us-west-2b"]], "SecurityGroupIds": [net.sg]},
    )


def statuses(events: Events, instance_id: str) -> list[str]:
    return [
        kw["node"]["InstanceStatus"]["Status"]
        for t, kw in events
        if t == "hyperpod.node.changed" and kw["node"]["InstanceId"] == instance_id
    ]


def groups_of(sm: Any, name: str) -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in sm.describe_cluster(ClusterName=name)["InstanceGroups"]}


def test_two_group_cluster_lifecycle(twin: Twin, env: tuple[Net, str], events: Events) -> None:
    net, eks_arn = env
    sm = twin.boto3_client("sagemaker")
    arn = sm.create_cluster(
        ClusterName="hp-main",
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[spot_group(net), efa_group(net)],
        NodeRecovery="Automatic",
        NodeProvisioningMode="Continuous",
        TieredStorageConfig={"Mode": "Enable", "InstanceMemoryAllocationPercentage": 20},
        Tags=[{"Key": "instantstart:cluster-tag", "Value": "main"}],
    )["ClusterArn"]
    assert arn.startswith("arn:aws:sagemaker:us-west-2:111122223333:cluster/")
    described = sm.describe_cluster(ClusterName="hp-main")
    assert described["ClusterStatus"] == "Creating"
    assert described["Orchestrator"] == {"Eks": {"ClusterArn": eks_arn}}
    assert described["NodeRecovery"] == "Automatic" and described["NodeProvisioningMode"] == "Continuous"
    assert described["TieredStorageConfig"] == {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 20}
    groups = groups_of(sm, "hp-main")
    assert groups["spot"]["CapacityRequirements"] == {"Spot": {}} and groups["spot"]["ThreadsPerCore"] == 1
    assert groups["efa"]["NetworkInterface"] == {"InterfaceType": "efa-only"}
    assert groups["efa"]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert (groups["spot"]["CurrentCount"], groups["spot"]["TargetCount"]) == (0, 2)
    assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "instantstart:cluster-tag", "Value": "main"}]

    advance(twin, 421)
    nodes = sm.list_cluster_nodes(ClusterName="hp-main")["ClusterNodeSummaries"]
    by_group: dict[str, list[str]] = {}
    for n in nodes:
        by_group.setdefault(n["InstanceGroupName"], []).append(n["InstanceStatus"]["Status"])
    assert by_group == {"spot": ["Running", "Running"], "efa": ["DeepHealthCheckInProgress"] * 2}
    assert sm.describe_cluster(ClusterName="hp-main")["ClusterStatus"] == "Creating"
    advance(twin, 241)
    described = sm.describe_cluster(ClusterName="hp-main")
    assert described["ClusterStatus"] == "InService"
    assert all(
        g["CurrentCount"] == g["TargetCount"] == 2 and g["Status"] == "InService" for g in described["InstanceGroups"]
    )

    efa_node = next(n for n in nodes if n["InstanceGroupName"] == "efa")["InstanceId"]
    details = sm.describe_cluster_node(ClusterName="hp-main", NodeId=efa_node)["NodeDetails"]
    assert details["Placement"] == {
        "AvailabilityZone": "us-west-2b",
        "AvailabilityZoneId": details["Placement"]["AvailabilityZoneId"],
    }
    assert details["Placement"]["AvailabilityZoneId"].startswith("usw2-az")
    assert details["InstanceType"] == "ml.p5.48xlarge" and details["ThreadsPerCore"] == 1
    assert statuses(events, efa_node) == ["Pending", "DeepHealthCheckInProgress", "Running"]
    published = next(kw for t, kw in events if t == "hyperpod.node.changed" and kw["node"]["InstanceId"] == efa_node)
    assert published["cluster_name"] == "hp-main" and published["eks_cluster_arn"] == eks_arn
    assert published["instance_group"]["InstanceGroupName"] == "efa"
    spot_node = next(n for n in nodes if n["InstanceGroupName"] == "spot")["InstanceId"]
    spot_details = sm.describe_cluster_node(ClusterName="hp-main", NodeId=spot_node)["NodeDetails"]
    assert spot_details["CapacityType"] == "Spot"
    assert spot_details["KubernetesConfig"]["CurrentLabels"] == {"team": "a"}


def test_scale_with_update_cluster_and_refuse_immutable_changes(twin: Twin, env: tuple[Net, str]) -> None:
    net, _ = env
    sm = twin.boto3_client("sagemaker")
    sm.update_cluster(ClusterName="hp-main", InstanceGroups=[spot_group(net, 3)])
    groups = groups_of(sm, "hp-main")
    assert (groups["spot"]["CurrentCount"], groups["spot"]["TargetCount"]) == (2, 3)
    assert groups["spot"]["ActiveOperations"] == {"Scaling": 1}
    assert groups["efa"]["TargetCount"] == 2  # untouched by a partial upsert
    advance(twin, 421)
    assert groups_of(sm, "hp-main")["spot"]["CurrentCount"] == 3
    with pytest.raises(ClientError) as err:
        sm.update_cluster(ClusterName="hp-main", InstanceGroups=[efa_group(net, interface="efa")])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "NetworkInterface" in err.value.response["Error"]["Message"]
    on_demand = spot_group(net, 3)
    on_demand["CapacityRequirements"] = {"OnDemand": {}}
    with pytest.raises(ClientError) as err:
        sm.update_cluster(ClusterName="hp-main", InstanceGroups=[on_demand])
    assert "CapacityRequirements" in err.value.response["Error"]["Message"]
    # A new group and a deletion in one call.
    sm.update_cluster(ClusterName="hp-main", InstanceGroups=[group("cpu", "ml.m5.xlarge", 1)])
    advance(twin, 421)
    assert groups_of(sm, "hp-main")["cpu"]["CurrentCount"] == 1
    sm.update_cluster(ClusterName="hp-main", InstanceGroupsToDelete=["cpu"])
    assert groups_of(sm, "hp-main")["cpu"]["Status"] == "Deleting"
    advance(twin, 62)
    assert "cpu" not in groups_of(sm, "hp-main")


def test_reboot_replace_and_delete_nodes(twin: Twin, env: tuple[Net, str], events: Events) -> None:
    sm = twin.boto3_client("sagemaker")
    spot = [
        n["InstanceId"]
        for n in sm.list_cluster_nodes(ClusterName="hp-main")["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "spot"
    ]
    rebooted, replaced, deleted = spot[0], spot[1], spot[2]
    result = sm.batch_reboot_cluster_nodes(ClusterName="hp-main", NodeIds=[rebooted, "i-0123456789abcdef0"])
    assert result["Successful"] == [rebooted]
    assert result["Failed"][0]["ErrorCode"] == "InstanceIdNotFound"
    node = sm.describe_cluster_node(ClusterName="hp-main", NodeId=rebooted)["NodeDetails"]
    assert node["InstanceStatus"]["Status"] == "Pending"
    advance(twin, 181)
    assert statuses(events, rebooted)[-2:] == ["Pending", "Running"]

    assert sm.batch_replace_cluster_nodes(ClusterName="hp-main", NodeIds=[replaced])["Successful"] == [replaced]
    # Continuous mode: the replacement exists (by NodeLogicalId) a minute before EC2 gives it an instance.
    provisioning = [
        n
        for n in sm.list_cluster_nodes(ClusterName="hp-main", IncludeNodeLogicalIds=True)["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "spot" and "InstanceId" not in n
    ]
    assert len(provisioning) == 1 and provisioning[0]["InstanceStatus"]["Status"] == "Pending"
    assert statuses(events, replaced)[-1] == "ShuttingDown"
    advance(twin, 61)
    spot_now = [
        n
        for n in sm.list_cluster_nodes(ClusterName="hp-main")["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "spot"
    ]
    fresh = [n["InstanceId"] for n in spot_now if n["InstanceId"] not in spot]
    assert len(fresh) == 1 and statuses(events, fresh[0]) == ["Pending"]
    removed = [kw for t, kw in events if t == "hyperpod.node.removed" and kw["instance_id"] == replaced]
    assert removed[0]["cluster_name"] == "hp-main" and removed[0]["eks_cluster_arn"] == env[1]
    advance(twin, 361)
    assert statuses(events, fresh[0]) == ["Pending", "Running"]

    result = sm.batch_delete_cluster_nodes(ClusterName="hp-main", NodeIds=[deleted, "i-0123456789abcdef0"])
    assert result["Successful"] == [deleted]
    assert result["Failed"] == [
        {"Code": "NodeIdNotFound", "Message": "Node i-0123456789abcdef0 not found.", "NodeId": "i-0123456789abcdef0"}
    ]
    assert groups_of(sm, "hp-main")["spot"]["TargetCount"] == 2
    advance(twin, 61)
    assert groups_of(sm, "hp-main")["spot"]["CurrentCount"] == 2
    messages = [e["Description"] for e in sm.list_cluster_events(ClusterName="hp-main")["Events"]]
    assert any(m.startswith("Replacing") for m in messages)


def test_health_finding_triggers_automatic_replacement(twin: Twin, events: Events) -> None:
    sm = twin.boto3_client("sagemaker")
    victim = next(
        n["InstanceId"]
        for n in sm.list_cluster_nodes(ClusterName="hp-main")["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "efa"
    )
    answer = control(
        twin, f"nodes/{victim}/health", {"status": "UnschedulablePendingReplacement", "reason": "GPU XID 79"}
    )
    assert answer["node_recovery"] == "Automatic"
    health = [kw for t, kw in events if t == "hyperpod.node.health" and kw["instance_id"] == victim]
    assert health[0]["health_status"] == "UnschedulablePendingReplacement" and health[0]["reason"] == "GPU XID 79"
    advance(twin, 61)
    assert statuses(events, victim)[-1] == "ShuttingDown"
    advance(twin, 61)
    ids = {n["InstanceId"] for n in sm.list_cluster_nodes(ClusterName="hp-main")["ClusterNodeSummaries"]}
    assert victim not in ids


def test_kubernetes_health_label_reboots_the_node(twin: Twin, env: tuple[Net, str], events: Events) -> None:
    sm = twin.boto3_client("sagemaker")
    node = next(
        n["InstanceId"]
        for n in sm.list_cluster_nodes(ClusterName="hp-main")["ClusterNodeSummaries"]
        if n["InstanceStatus"]["Status"] == "Running"
    )
    # What the simulator publishes when kubectl labels the Node UnschedulablePendingReboot.
    twin.bus.publish(
        "kube.node.health_label", eks_cluster_arn=env[1], instance_id=node, status="UnschedulablePendingReboot"
    )
    advance(twin, 61)
    assert statuses(events, node)[-1] == "Pending"
    advance(twin, 181)
    assert statuses(events, node)[-1] == "Running"


def test_software_update_and_deletion(twin: Twin, env: tuple[Net, str], events: Events) -> None:
    net, _ = env
    ec2 = twin.boto3_client("ec2")
    sm = twin.boto3_client("sagemaker")
    advance(twin, 700)  # let the replacement above finish
    assert sm.describe_cluster(ClusterName="hp-main")["ClusterStatus"] == "InService"
    sm.update_cluster_software(ClusterName="hp-main")
    assert sm.describe_cluster(ClusterName="hp-main")["ClusterStatus"] == "SystemUpdating"
    advance(twin, 601)
    described = sm.describe_cluster(ClusterName="hp-main")
    assert described["ClusterStatus"] == "InService"
    assert all(g["ImageVersionStatus"] == "UpToDate" for g in described["InstanceGroups"])
    arn = described["ClusterArn"]
    with pytest.raises(ClientError) as err:
        ec2.delete_subnet(SubnetId=net.compute["us-west-2b"])
    assert err.value.response["Error"]["Code"] == "DependencyViolation"
    assert "HyperPod cluster hp-main" in err.value.response["Error"]["Message"]
    sm.delete_cluster(ClusterName="hp-main")
    assert sm.describe_cluster(ClusterName="hp-main")["ClusterStatus"] == "Deleting"
    advance(twin, 301)
    with pytest.raises(ClientError) as err:
        sm.describe_cluster(ClusterName="hp-main")
    assert err.value.response["Error"]["Code"] == "ResourceNotFound"
    assert any(t == "hyperpod.cluster.deleted" and kw["cluster_arn"] == arn for t, kw in events)
    ec2.delete_subnet(SubnetId=net.compute["us-west-2b"])  # no network interfaces left in it
    with pytest.raises(ClientError) as err:
        ec2.delete_security_group(GroupId=net.sg)
    assert "EKS cluster hp-eks" in err.value.response["Error"]["Message"]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"InstanceType": "ml.g5.99xlarge"}, "enum value set"),
        ({"InstanceType": "ml.c7g.xlarge", "ThreadsPerCore": 2}, "ThreadsPerCore"),
        ({"InstanceType": "ml.g5.8xlarge", "NetworkInterface": {"InterfaceType": "efa-only"}}, "efa-only"),
        ({"InstanceType": "ml.m5.xlarge", "OnStartDeepHealthChecks": ["InstanceStress"]}, "Deep health checks"),
        ({"InstanceCount": 1, "MinInstanceCount": 2}, "MinInstanceCount"),
        ({"ExecutionRole": "arn:aws:iam::111122223333:role/missing"}, "does not exist"),
        ({"ExecutionRole": "arn:aws:iam::111122223333:role/eks-trusting"}, "cannot be assumed by sagemaker"),
    ],
)
def test_invalid_groups_are_refused(twin: Twin, env: tuple[Net, str], change: dict[str, Any], needle: str) -> None:
    net, eks_arn = env
    iam = twin.boto3_client("iam")
    if not [r for r in iam.list_roles()["Roles"] if r["RoleName"] == "eks-trusting"]:
        statement = {"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}
        trust = json.dumps({"Statement": [statement]})
        iam.create_role(RoleName="eks-trusting", AssumeRolePolicyDocument=trust)
    spec = {**group("g", "ml.g5.8xlarge", 1), **change}
    with pytest.raises(ClientError) as err:
        twin.boto3_client("sagemaker").create_cluster(
            ClusterName="bad",
            Orchestrator={"Eks": {"ClusterArn": eks_arn}},
            VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
            InstanceGroups=[spec],
        )
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert needle in err.value.response["Error"]["Message"]


def test_eks_cluster_must_use_access_entries(twin: Twin, env: tuple[Net, str]) -> None:
    net, _ = env
    legacy = build_eks(twin, net, "hp-legacy", mode="CONFIG_MAP")
    with pytest.raises(ClientError) as err:
        twin.boto3_client("sagemaker").create_cluster(
            ClusterName="legacy",
            Orchestrator={"Eks": {"ClusterArn": legacy}},
            VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
            InstanceGroups=[group("g", "ml.g5.8xlarge", 1)],
        )
    assert "API_AND_CONFIG_MAP" in err.value.response["Error"]["Message"]
