"""Training plan AZs, scripted faults (throttle, 5xx, capacity, quota), quotas, FSx lifecycle and reset."""

from __future__ import annotations

import urllib.error
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import Net, advance, build_eks, build_network, control, group


@pytest.fixture(scope="module")
def env(twin: Twin) -> tuple[Net, str]:
    net = build_network(twin, "10.60")
    return net, build_eks(twin, net, "faults-eks")


def create(twin: Twin, env: tuple[Net, str], name: str, groups: list[dict[str, Any]], **extra: Any) -> str:
    net, eks_arn = env
    arn: str = twin.boto3_client("sagemaker").create_cluster(
        ClusterName=name,
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=groups,
        **extra,
    )["ClusterArn"]
    return arn


def test_training_plan_must_match_the_subnet_az(twin: Twin, env: tuple[Net, str]) -> None:
    net, _ = env
    sm = twin.boto3_client("sagemaker")
    offerings = sm.search_training_plan_offerings(
        InstanceType="ml.p5.48xlarge", InstanceCount=2, DurationHours=48, TargetResources=["hyperpod-cluster"]
    )["TrainingPlanOfferings"]
    in_a = next(o for o in offerings if o["ReservedCapacityOfferings"][0]["AvailabilityZone"] == "us-west-2a")
    control(
        twin,
        "faults",
        {"kind": "insufficient_capacity", "instance_type": "ml.p5.48xlarge", "availability_zone": "us-west-2b"},
    )
    fewer = sm.search_training_plan_offerings(
        InstanceType="ml.p5.48xlarge", InstanceCount=2, DurationHours=48, TargetResources=["hyperpod-cluster"]
    )["TrainingPlanOfferings"]
    assert "us-west-2b" not in {o["ReservedCapacityOfferings"][0]["AvailabilityZone"] for o in fewer}
    assert len(fewer) == len(offerings) - 1
    control(twin, "faults", method="DELETE")
    plan_arn = sm.create_training_plan(
        TrainingPlanName="p5-plan", TrainingPlanOfferingId=in_a["TrainingPlanOfferingId"]
    )["TrainingPlanArn"]
    plan = sm.describe_training_plan(TrainingPlanName="p5-plan")
    assert plan["Status"] == "Pending" and plan["TotalInstanceCount"] == 2
    summary = plan["ReservedCapacitySummaries"][0]
    assert summary["AvailabilityZone"] == "us-west-2a" and summary["AvailabilityZoneId"].startswith("usw2-az")
    advance(twin, 61)
    assert sm.describe_training_plan(TrainingPlanName=plan_arn)["Status"] == "Active"
    assert [p["TrainingPlanName"] for p in sm.list_training_plans()["TrainingPlanSummaries"]] == ["p5-plan"]

    wrong_az = group(
        "reserved",
        "ml.p5.48xlarge",
        2,
        TrainingPlanArn=plan_arn,
        OverrideVpcConfig={"Subnets": [net.compute["us-west-2b"]], "SecurityGroupIds": [net.sg]},
    )
    with pytest.raises(ClientError) as err:
        create(twin, env, "plan-wrong-az", [wrong_az])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "us-west-2b" in err.value.response["Error"]["Message"]
    assert "us-west-2a" in err.value.response["Error"]["Message"]
    right_az = {**wrong_az, "OverrideVpcConfig": {"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]}}
    create(twin, env, "plan-ok", [right_az])
    groups = sm.describe_cluster(ClusterName="plan-ok")["InstanceGroups"]
    assert groups[0]["TrainingPlanArn"] == plan_arn and groups[0]["TrainingPlanStatus"] == "Active"
    assert sm.describe_training_plan(TrainingPlanName="p5-plan")["InUseInstanceCount"] == 2
    with pytest.raises(ClientError) as err:
        create(twin, env, "plan-too-big", [{**right_az, "InstanceGroupName": "more", "InstanceCount": 1}])
    assert "0 available" in err.value.response["Error"]["Message"]


def test_injected_throttle_is_retried_by_botocore(twin: Twin) -> None:
    control(twin, "faults", {"kind": "throttle", "service": "sagemaker", "operation": "ListClusters", "count": 2})
    response = twin.boto3_client("sagemaker").list_clusters()
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert control(twin, "faults")["faults"] == []
    control(twin, "faults", {"kind": "throttle", "service": "ec2", "operation": "DescribeVpcs", "count": 1})
    assert twin.boto3_client("ec2").describe_vpcs()["ResponseMetadata"]["RetryAttempts"] == 1


def test_injected_5xx_is_retried_and_persistent_one_surfaces(twin: Twin) -> None:
    control(
        twin,
        "faults",
        {"kind": "server_error", "service": "eks", "operation": "ListClusters", "count": 1, "status": 503},
    )
    assert twin.boto3_client("eks").list_clusters()["ResponseMetadata"]["RetryAttempts"] == 1
    fault = control(twin, "faults", {"kind": "server_error", "service": "fsx", "operation": "DescribeFileSystems"})
    with pytest.raises(ClientError) as err:
        twin.boto3_client("fsx").describe_file_systems()
    assert err.value.response["Error"]["Code"] == "InternalFailure"
    control(twin, f"faults/{fault['faults'][0]['id']}", method="DELETE")
    assert twin.boto3_client("fsx").describe_file_systems()["FileSystems"] == []


def test_capacity_shortage_continuous_mode_keeps_retrying(twin: Twin, env: tuple[Net, str]) -> None:
    sm = twin.boto3_client("sagemaker")
    control(
        twin,
        "faults",
        {"kind": "insufficient_capacity", "instance_type": "ml.g6.12xlarge", "availability_zone": "us-west-2a"},
    )
    create(twin, env, "short-cont", [group("g6", "ml.g6.12xlarge", 2)], NodeProvisioningMode="Continuous")
    advance(twin, 481)
    described = sm.describe_cluster(ClusterName="short-cont")
    assert described["ClusterStatus"] == "InService"
    g = described["InstanceGroups"][0]
    assert (g["CurrentCount"], g["TargetCount"]) == (0, 2)
    assert "sufficient capacity" in described["FailureMessage"]
    errors = [e for e in sm.list_cluster_events(ClusterName="short-cont")["Events"] if e["EventLevel"] == "Error"]
    assert errors and errors[0]["InstanceGroupName"] == "g6" and "InsufficientCapacity" in errors[0]["Description"]
    control(twin, "faults", method="DELETE")
    advance(twin, 301)  # the next retry launches the nodes
    advance(twin, 421)
    described = sm.describe_cluster(ClusterName="short-cont")
    assert described["InstanceGroups"][0]["CurrentCount"] == 2
    assert "FailureMessage" not in described


def test_capacity_shortage_classic_mode_fails_creation(twin: Twin, env: tuple[Net, str]) -> None:
    sm = twin.boto3_client("sagemaker")
    control(
        twin,
        "faults",
        {"kind": "insufficient_capacity", "instance_type": "ml.g6e.12xlarge", "availability_zone": "usw2-az2"},
    )
    create(twin, env, "short-classic", [group("g6e", "ml.g6e.12xlarge", 1), group("cpu", "ml.m5.xlarge", 1)])
    assert sm.describe_cluster(ClusterName="short-classic")["ClusterStatus"] == "RollingBack"
    advance(twin, 121)
    described = sm.describe_cluster(ClusterName="short-classic")
    assert described["ClusterStatus"] == "Failed"
    assert described["FailureMessage"] == (
        "We currently do not have sufficient capacity for the requested instance type(s). Please try again."
    )
    control(twin, "faults", method="DELETE")


def test_capacity_shortage_classic_update_rolls_the_group_back(twin: Twin, env: tuple[Net, str]) -> None:
    sm = twin.boto3_client("sagemaker")
    create(twin, env, "short-update", [group("g6", "ml.g6.2xlarge", 1)])
    advance(twin, 481)
    control(
        twin, "faults", {"kind": "insufficient_capacity", "instance_type": "ml.g6.2xlarge", "availability_zone": "*"}
    )
    sm.update_cluster(ClusterName="short-update", InstanceGroups=[group("g6", "ml.g6.2xlarge", 3)])
    described = sm.describe_cluster(ClusterName="short-update")
    assert described["ClusterStatus"] == "RollingBack"  # as HyperPod shows a failed scale-up
    with pytest.raises(ClientError) as busy:
        sm.update_cluster(ClusterName="short-update", InstanceGroups=[group("g6", "ml.g6.2xlarge", 2)])
    assert busy.value.response["Error"]["Code"] == "ConflictException"
    advance(twin, 121)
    described = sm.describe_cluster(ClusterName="short-update")
    assert described["ClusterStatus"] == "InService"
    g = described["InstanceGroups"][0]
    assert (g["CurrentCount"], g["TargetCount"]) == (1, 1)
    assert "sufficient capacity" in described["FailureMessage"]
    control(twin, "faults", method="DELETE")


def test_multi_az_group_falls_back_to_the_az_with_capacity(twin: Twin, env: tuple[Net, str]) -> None:
    net, _ = env
    sm = twin.boto3_client("sagemaker")
    control(
        twin,
        "faults",
        {"kind": "insufficient_capacity", "instance_type": "ml.g5.4xlarge", "availability_zone": "us-west-2a"},
    )
    both = {"Subnets": [net.compute["us-west-2a"], net.compute["us-west-2b"]], "SecurityGroupIds": [net.sg]}
    create(twin, env, "multi-az", [group("g5", "ml.g5.4xlarge", 2, OverrideVpcConfig=both)])
    nodes = sm.list_cluster_nodes(ClusterName="multi-az")["ClusterNodeSummaries"]
    zones = {
        sm.describe_cluster_node(ClusterName="multi-az", NodeId=n["InstanceId"])["NodeDetails"]["Placement"][
            "AvailabilityZone"
        ]
        for n in nodes
    }
    assert len(nodes) == 2 and zones == {"us-west-2b"}
    control(twin, "faults", method="DELETE")


def test_quotas_are_reported_and_enforced(twin: Twin, env: tuple[Net, str]) -> None:
    sq = twin.boto3_client("service-quotas")
    quotas = {q["QuotaName"]: q for q in sq.list_service_quotas(ServiceCode="sagemaker", MaxResults=100)["Quotas"]}
    paginator = sq.get_paginator("list_service_quotas")
    names = {q["QuotaName"] for page in paginator.paginate(ServiceCode="sagemaker") for q in page["Quotas"]}
    assert "ml.p5.48xlarge for cluster usage" in names and len(names) > len(quotas) - 1
    control(twin, "quotas", {"instance_type": "ml.trn1.32xlarge", "value": 1})
    code = next(
        q
        for q in paginator.paginate(ServiceCode="sagemaker")
        for q in q["Quotas"]
        if q["QuotaName"] == "ml.trn1.32xlarge for cluster usage"
    )["QuotaCode"]
    assert sq.get_service_quota(ServiceCode="sagemaker", QuotaCode=code)["Quota"]["Value"] == 1
    with pytest.raises(ClientError) as err:
        create(twin, env, "over-quota", [group("trn", "ml.trn1.32xlarge", 2)])
    assert err.value.response["Error"]["Code"] == "ResourceLimitExceeded"
    assert "ml.trn1.32xlarge for cluster usage" in err.value.response["Error"]["Message"]
    vpcs = sq.get_service_quota(ServiceCode="vpc", QuotaCode="L-F678F1CE")["Quota"]
    assert vpcs["QuotaName"] == "VPCs per Region" and vpcs["Value"] == 5
    control(twin, "quotas", {"service_code": "vpc", "quota_code": "L-F678F1CE", "value": 1})
    with pytest.raises(ClientError) as err:
        twin.boto3_client("ec2").create_vpc(CidrBlock="10.99.0.0/16")
    assert err.value.response["Error"]["Code"] == "VpcLimitExceeded"
    control(twin, "faults", {"kind": "quota_exceeded", "service": "eks", "operation": "CreateCluster", "count": 1})
    with pytest.raises(ClientError) as err:
        twin.boto3_client("eks").create_cluster(
            name="q", roleArn="arn:aws:iam::111122223333:role/x", resourcesVpcConfig={}
        )
    assert err.value.response["Error"]["Code"] == "ResourceLimitExceededException"


def test_fsx_lustre_lifecycle(twin: Twin, env: tuple[Net, str]) -> None:
    net, _ = env
    fsx = twin.boto3_client("fsx")
    fs = fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[net.compute["us-west-2a"]],
        SecurityGroupIds=[net.sg],
        FileSystemTypeVersion="2.15",
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
        Tags=[{"Key": "instantstart:cluster-tag", "Value": "x"}],
    )["FileSystem"]
    assert fs["Lifecycle"] == "CREATING"
    assert fs["DNSName"] == f"{fs['FileSystemId']}.fsx.us-west-2.amazonaws.com"
    assert len(fs["LustreConfiguration"]["MountName"]) == 8
    # Its security groups are on its network interface (DescribeFileSystems does not list them); none given:
    # the VPC's default group.
    ec2 = twin.boto3_client("ec2")
    enis = ec2.describe_network_interfaces(NetworkInterfaceIds=fs["NetworkInterfaceIds"])["NetworkInterfaces"]
    assert [g["GroupId"] for g in enis[0]["Groups"]] == [net.sg] and enis[0]["SubnetId"] == net.compute["us-west-2a"]
    default = fsx.create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[net.compute["us-west-2a"]],
        LustreConfiguration={"DeploymentType": "SCRATCH_2"},
    )["FileSystem"]
    vpc_default = ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [default["VpcId"]]}, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"][0]["GroupId"]
    default_eni = ec2.describe_network_interfaces(NetworkInterfaceIds=default["NetworkInterfaceIds"])
    assert [g["GroupId"] for g in default_eni["NetworkInterfaces"][0]["Groups"]] == [vpc_default]
    with pytest.raises(ClientError) as err:
        fsx.create_file_system(
            FileSystemType="LUSTRE",
            StorageCapacity=1300,
            SubnetIds=[net.compute["us-west-2a"]],
            LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
        )
    assert err.value.response["Error"]["Code"] == "InvalidParameterValue"
    # INTELLIGENT_TIERING: PERSISTENT_2, no StorageCapacity, ThroughputCapacity and a read cache.
    tiering = {"DeploymentType": "PERSISTENT_2", "ThroughputCapacity": 4000,
               "DataReadCacheConfiguration": {"SizingMode": "PROPORTIONAL_TO_THROUGHPUT_CAPACITY"}}
    for extra, lustre, code in [
        ({"StorageCapacity": 1200}, tiering, "BadRequest"),
        ({}, {**tiering, "ThroughputCapacity": 6000}, "InvalidParameterValue"),
        ({}, {"DeploymentType": "PERSISTENT_2", "ThroughputCapacity": 4000}, "BadRequest"),
        ({}, {**tiering, "DeploymentType": "PERSISTENT_1"}, "BadRequest"),
    ]:
        with pytest.raises(ClientError) as err:
            fsx.create_file_system(FileSystemType="LUSTRE", StorageType="INTELLIGENT_TIERING",
                                   SubnetIds=[net.compute["us-west-2a"]], LustreConfiguration=lustre, **extra)
        assert err.value.response["Error"]["Code"] == code, (extra, lustre)
    tiered = fsx.create_file_system(FileSystemType="LUSTRE", StorageType="INTELLIGENT_TIERING",
                                    SubnetIds=[net.compute["us-west-2a"]], LustreConfiguration=tiering)["FileSystem"]
    assert "StorageCapacity" not in tiered and tiered["LustreConfiguration"]["ThroughputCapacity"] == 4000
    advance(twin, 361)
    got = fsx.describe_file_systems(FileSystemIds=[fs["FileSystemId"]])["FileSystems"][0]
    assert (
        got["Lifecycle"] == "AVAILABLE"
        and got["LustreConfiguration"]["MountName"] == fs["LustreConfiguration"]["MountName"]
    )
    assert fsx.list_tags_for_resource(ResourceARN=fs["ResourceARN"])["Tags"][0]["Key"] == "instantstart:cluster-tag"
    fsx.delete_file_system(FileSystemId=fs["FileSystemId"])
    advance(twin, 181)
    with pytest.raises(ClientError) as err:
        fsx.describe_file_systems(FileSystemIds=[fs["FileSystemId"]])
    assert err.value.response["Error"]["Code"] == "FileSystemNotFound"
    gone = [{"Name": "network-interface-id", "Values": fs["NetworkInterfaceIds"]}]
    left = ec2.describe_network_interfaces(Filters=gone)
    assert left["NetworkInterfaces"] == []  # its network interface went with it


def test_tagging_api_lists_twin_owned_resources(twin: Twin, env: tuple[Net, str]) -> None:
    net, _ = env
    tag = {"Key": "instantstart:cluster-tag", "Value": "tagged"}
    arn = create(twin, env, "tagged-hp", [group("cpu", "ml.m5.xlarge", 1)], Tags=[tag])
    fs = twin.boto3_client("fsx").create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[net.compute["us-west-2a"]],
        LustreConfiguration={"DeploymentType": "SCRATCH_2"},
        Tags=[tag],
    )["FileSystem"]
    tagging = twin.boto3_client("resourcegroupstaggingapi")
    found = tagging.get_resources(TagFilters=[{"Key": tag["Key"], "Values": ["tagged"]}])["ResourceTagMappingList"]
    assert {r["ResourceARN"] for r in found} == {arn, fs["ResourceARN"]}
    assert tagging.tag_resources(ResourceARNList=[arn], Tags={"extra": "1"})["FailedResourcesMap"] == {}
    tags = {t["Key"]: t["Value"] for t in twin.boto3_client("sagemaker").list_tags(ResourceArn=arn)["Tags"]}
    assert tags == {"instantstart:cluster-tag": "tagged", "extra": "1"}


def test_autoscaler_path_and_classic_update_conflict(twin: Twin, env: tuple[Net, str]) -> None:
    sm = twin.boto3_client("sagemaker")
    create(
        twin,
        env,
        "karp",
        [group("cpu", "ml.c5.xlarge", 0)],
        NodeProvisioningMode="Continuous",
        AutoScaling={"Mode": "Enable", "AutoScalerType": "Karpenter"},
        ClusterRole="arn:aws:iam::111122223333:role/hp-autoscale",
    )
    advance(twin, 481)
    described = sm.describe_cluster(ClusterName="karp")
    assert described["ClusterStatus"] == "InService" and described["AutoScaling"]["Status"] == "InService"
    added = sm.batch_add_cluster_nodes(
        ClusterName="karp", NodesToAdd=[{"InstanceGroupName": "cpu", "IncrementTargetCountBy": 2}]
    )
    assert len(added["Successful"]) == 2 and added["Failed"] == []
    missing = sm.batch_add_cluster_nodes(
        ClusterName="karp", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
    )
    assert missing["Failed"][0]["ErrorCode"] == "InstanceGroupNotFound"
    advance(twin, 421)
    g = sm.describe_cluster(ClusterName="karp")["InstanceGroups"][0]
    assert (g["CurrentCount"], g["TargetCount"]) == (2, 2)

    create(twin, env, "classic", [group("cpu", "ml.c5.xlarge", 1)])
    advance(twin, 481)
    sm.update_cluster(ClusterName="classic", InstanceGroups=[group("cpu", "ml.c5.xlarge", 2)])
    assert sm.describe_cluster(ClusterName="classic")["ClusterStatus"] == "Updating"
    with pytest.raises(ClientError) as err:
        sm.update_cluster(ClusterName="classic", InstanceGroups=[group("cpu", "ml.c5.xlarge", 3)])
    assert err.value.response["Error"]["Code"] == "ConflictException"
    with pytest.raises(ClientError) as err:
        sm.batch_add_cluster_nodes(
            ClusterName="classic", NodesToAdd=[{"InstanceGroupName": "cpu", "IncrementTargetCountBy": 1}]
        )
    assert err.value.response["Error"]["Code"] == "ValidationException"
    advance(twin, 421)
    assert sm.describe_cluster(ClusterName="classic")["ClusterStatus"] == "InService"


def test_missing_lifecycle_script_fails_nodes_until_uploaded(twin: Twin, env: tuple[Net, str]) -> None:
    sm = twin.boto3_client("sagemaker")
    lcc = {"LifeCycleConfig": {"SourceS3Uri": f"s3://{twin.project_bucket}/lcs/", "OnCreate": "on_create.sh"}}
    create(twin, env, "lcs-cont", [group("cpu", "ml.c5.xlarge", 1, **lcc)], NodeProvisioningMode="Continuous")
    advance(twin, 481)
    described = sm.describe_cluster(ClusterName="lcs-cont")
    assert "lcs/on_create.sh could not be downloaded" in described["FailureMessage"]
    assert described["InstanceGroups"][0]["CurrentCount"] == 0
    twin.boto3_client("s3").put_object(Bucket=twin.project_bucket, Key="lcs/on_create.sh", Body=b"#!/bin/bash\n")
    advance(twin, 301)  # the next retry launches a node that finds its script
    advance(twin, 421)
    described = sm.describe_cluster(ClusterName="lcs-cont")
    assert described["InstanceGroups"][0]["CurrentCount"] == 1 and "FailureMessage" not in described

    missing = {"LifeCycleConfig": {"SourceS3Uri": f"s3://{twin.project_bucket}/none", "OnCreate": "on_create.sh"}}
    create(twin, env, "lcs-classic", [group("cpu", "ml.c5.xlarge", 1, **missing)])
    advance(twin, 421)
    nodes = sm.list_cluster_nodes(ClusterName="lcs-classic")["ClusterNodeSummaries"]
    assert [n["InstanceStatus"]["Status"] for n in nodes] == ["ShuttingDown"]
    advance(twin, 121)
    assert sm.describe_cluster(ClusterName="lcs-classic")["ClusterStatus"] == "Failed"


def test_control_endpoints_refuse_bad_input(twin: Twin) -> None:
    for path, body, code in (
        ("nodes/i-0123456789abcdef0/health", {"status": "UnschedulablePendingReplacement"}, 404),
        ("nodes/i-0123456789abcdef0/health", {"status": "Broken"}, 400),
        ("faults", {"kind": "meteor"}, 400),
        ("faults", {"kind": "throttle"}, 400),
        ("quotas", {"instance_type": "ml.nope.xlarge", "value": 1}, 400),
        ("clock", {"scale": 0}, 400),
    ):
        with pytest.raises(urllib.error.HTTPError) as err:
            control(twin, path, body)
        assert err.value.code == code, path
    quotas = control(twin, "quotas")["quotas"]
    assert any(q["QuotaName"] == "ml.p5.48xlarge for cluster usage" for q in quotas)


def test_clock_and_reset(twin: Twin) -> None:
    before = control(twin, "clock")
    after = control(twin, "clock", {"advance": 100})
    assert after["now"] - before["now"] >= 100
    assert control(twin, "clock", {"scale": 0.002})["scale"] == 0.002
    control(twin, "faults", {"kind": "throttle", "service": "sts", "operation": "GetCallerIdentity"})
    control(twin, "reset", {})
    assert control(twin, "faults")["faults"] == []
    assert twin.boto3_client("sagemaker").list_clusters()["ClusterSummaries"] == []
    assert twin.boto3_client("eks").list_clusters()["clusters"] == []
    ec2 = twin.boto3_client("ec2")
    assert [v["IsDefault"] for v in ec2.describe_vpcs()["Vpcs"]] == [True]
    assert twin.project_bucket in [b["Name"] for b in twin.boto3_client("s3").list_buckets()["Buckets"]]
    assert twin.boto3_client("sts").get_caller_identity()["Account"] == twin.account_id
