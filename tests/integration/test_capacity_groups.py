"""Instance groups against the twin: Spot, EFA-only and training-plan groups, scaling through the allowlist,
a dedicated subnet that outlives its group, discovery — through REST and an MCP client."""

from __future__ import annotations

from typing import Any

import httpx

from instantstart.twin_process import TwinProcess
from tests.support.flows import add_group, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal


def groups_of(twin: TwinProcess, cluster: str) -> dict[str, dict[str, Any]]:
    """DescribeCluster's instance groups by name, read from the twin."""
    sm: Any = twin_client(twin, "sagemaker")
    return {g["InstanceGroupName"]: g for g in sm.describe_cluster(ClusterName=cluster)["InstanceGroups"]}


def test_spot_efa_only_and_training_plan_groups(cp: Running, twin: TwinProcess) -> None:
    sm: Any = twin_client(twin, "sagemaker")
    with cp.client() as client:
        make_hyperpod(client, "cap1")
        # EFA-only on a type without multiple network cards: refused up front, nothing sent to HyperPod.
        refused = client.post("/api/v1/capacity/instance-groups", json={
            "instanceGroupName": "efa-bad", "instanceType": "ml.g6.4xlarge", "instanceCount": 1,
            "availabilityZone": "us-west-2c", "efaOnly": True})
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["message"].startswith("Invalid input: efaOnly:") and "ml.p5.48xlarge" in error["hint"]
        assert error["details"]["fields"][0]["field"] == "efaOnly"
        assert set(groups_of(twin, "hp-cluster-cap1")) == {"accelerated-cap1"}
        # The same refusal through an MCP client, and the tool description states what is fixed for life.
        [agent, described] = mcp_raw(cp, [("hyperpod_add_instance_group", {
            "instanceGroupName": "efa-bad", "instanceType": "ml.g6e.12xlarge", "instanceCount": 1,
            "availabilityZone": "us-west-2c", "efaOnly": True})])
        assert agent["isError"] and agent["payload"]["error"]["code"] == "INVALID_INPUT", agent
        assert "efaOnly" in agent["payload"]["error"]["message"]
        assert "fixed for the life of the group" in described

        spot = add_group(client, instanceGroupName="spot-a", instanceType="ml.g6.4xlarge", instanceCount=1,
                         availabilityZone="us-west-2a", isSpot=True)
        assert spot["status"] == "SUCCEEDED", spot
        result = spot["stages"][0]["outputs"]
        assert result["capacityType"] == "Spot" and "fixed for the life of the group" in result["notes"][-1]

        efa = add_group(client, instanceGroupName="efa-a", instanceType="ml.p5.48xlarge", instanceCount=1,
                        availabilityZone="us-west-2c", efaOnly=True, onStartDeepHealthChecks=True)
        assert efa["status"] == "SUCCEEDED", efa
        assert efa["stages"][0]["outputs"]["networkInterface"] == "efa-only"

        # A training plan in one AZ; the request names another: placed in the plan's AZ, with a note.
        offerings = sm.search_training_plan_offerings(
            InstanceType="ml.p5.48xlarge", InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"]
        )["TrainingPlanOfferings"]
        offering = next(o for o in offerings if o["ReservedCapacityOfferings"][0]["AvailabilityZone"] != "us-west-2a")
        plan_az = offering["ReservedCapacityOfferings"][0]["AvailabilityZone"]
        arn = sm.create_training_plan(TrainingPlanName="tp-cap1",
                                      TrainingPlanOfferingId=offering["TrainingPlanOfferingId"])["TrainingPlanArn"]
        plan_group = {"instanceGroupName": "plan-a", "instanceType": "ml.p5.48xlarge", "instanceCount": 1,
                      "availabilityZone": "us-west-2a", "trainingPlanArn": arn}
        strict = client.post("/api/v1/capacity/instance-groups", json={**plan_group, "strictAvailabilityZone": True})
        assert strict.status_code == 422 and plan_az in strict.json()["error"]["message"], strict.text
        planned = add_group(client, **plan_group)
        assert planned["status"] == "SUCCEEDED", planned
        outputs = planned["stages"][0]["outputs"]
        assert outputs["availabilityZone"] == plan_az and outputs["capacityType"] == "TrainingPlan"
        assert any(plan_az in note and "us-west-2a" in note for note in outputs["notes"]), outputs["notes"]

    groups = groups_of(twin, "hp-cluster-cap1")
    assert groups["spot-a"]["CapacityRequirements"] == {"Spot": {}} and groups["spot-a"]["CurrentCount"] == 1
    assert groups["efa-a"]["NetworkInterface"] == {"InterfaceType": "efa-only"}
    assert groups["plan-a"]["TrainingPlanArn"] == arn and groups["plan-a"]["CurrentCount"] == 1
    ec2: Any = twin_client(twin, "ec2")
    plan_subnet = groups["plan-a"]["OverrideVpcConfig"]["Subnets"][0]
    assert ec2.describe_subnets(SubnetIds=[plan_subnet])["Subnets"][0]["AvailabilityZone"] == plan_az
    # The first group was never rewritten by the partial upserts.
    assert "OverrideVpcConfig" not in groups["accelerated-cap1"] and groups["accelerated-cap1"]["CurrentCount"] == 1


def test_scaling_keeps_health_checks_and_efa_and_a_dedicated_subnet_outlives_its_group(
    cp: Running, twin: TwinProcess
) -> None:
    with cp.client() as client:
        make_hyperpod(client, "cap2")
        efa = add_group(client, instanceGroupName="efa-b", instanceType="ml.p5.48xlarge", instanceCount=1,
                        availabilityZone="us-west-2c", efaOnly=True, onStartDeepHealthChecks=True)
        assert efa["status"] == "SUCCEEDED", efa
    # Scale through an MCP client, as an agent would.
    [ref] = mcp_calls(cp, [("hyperpod_scale_instance_group", {"name": "efa-b", "targetCount": 2})])
    assert ref["statusTool"] == "operation_get", ref
    scaled = mcp_wait(cp, ref["operationId"])
    assert scaled["status"] == "SUCCEEDED", scaled
    group = groups_of(twin, "hp-cluster-cap2")["efa-b"]
    assert (group["TargetCount"], group["CurrentCount"]) == (2, 2)
    assert group["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert group["NetworkInterface"] == {"InterfaceType": "efa-only"}
    assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]

    ec2: Any = twin_client(twin, "ec2")
    with cp.client() as client:
        first = add_group(client, instanceGroupName="ded-a", instanceType="ml.g6.4xlarge", instanceCount=1,
                          availabilityZone="us-west-2b", newSubnet=True)
        assert first["status"] == "SUCCEEDED", first
        subnet = first["stages"][0]["outputs"]["subnetId"]
        assert first["stages"][0]["outputs"]["dedicatedSubnet"] is True
        assert groups_of(twin, "hp-cluster-cap2")["ded-a"]["OverrideVpcConfig"]["Subnets"] == [subnet]
        deleted = client.post("/api/v1/capacity/instance-groups/delete", json={"instanceGroupName": "ded-a"})
        assert deleted.status_code == 202, deleted.text
        view = wait_terminal(client, deleted.json()["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED" and view["stages"][0]["outputs"]["keptSubnetId"] == subnet, view
        assert "ded-a" not in groups_of(twin, "hp-cluster-cap2")
        assert ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["SubnetId"] == subnet
        again = add_group(client, instanceGroupName="ded-a", instanceType="ml.g6.4xlarge", instanceCount=1,
                          availabilityZone="us-west-2b", newSubnet=True)
        assert again["status"] == "SUCCEEDED", again
        assert again["stages"][0]["outputs"]["subnetId"] == subnet
        # A successor under another name can take the kept subnet explicitly.
        successor = add_group(client, instanceGroupName="ded-b", instanceType="ml.g6.4xlarge", instanceCount=0,
                              availabilityZone="us-west-2b", subnetId=subnet)
        assert successor["status"] == "SUCCEEDED" and successor["stages"][0]["outputs"]["subnetId"] == subnet

        # A capacity shortage fails the add with a hint; once capacity is back, operation_retry finishes it.
        fault = {"kind": "insufficient_capacity", "instance_type": "ml.g6.8xlarge", "availability_zone": "us-west-2a"}
        httpx.post(twin.endpoint_url + "/_twin/faults", json=fault).raise_for_status()
        short = add_group(client, instanceGroupName="short", instanceType="ml.g6.8xlarge", instanceCount=1,
                          availabilityZone="us-west-2a")
        assert short["status"] == "FAILED" and short["error"]["code"] == "CAPACITY_UNAVAILABLE", short
        assert "operation_retry" in short["error"]["hint"]
        httpx.delete(twin.endpoint_url + "/_twin/faults").raise_for_status()
        client.post(f"/api/v1/operations/{short['operationId']}/retry").raise_for_status()
        retried = wait_terminal(client, short["operationId"], timeout=120)
        assert retried["status"] == "SUCCEEDED", retried
        assert groups_of(twin, "hp-cluster-cap2")["short"]["CurrentCount"] == 1

        missing = client.post("/api/v1/capacity/instance-groups/scale", json={"name": "nope", "targetCount": 1})
        assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"], missing.text

    [listing] = mcp_calls(cp, [("cluster_get_instance_groups", {})])
    by_name = {g["name"]: g for g in listing["instanceGroups"]}
    assert by_name["efa-b"]["networkInterface"] == "efa-only" and by_name["efa-b"]["currentCount"] == 2
    assert by_name["ded-a"]["dedicatedSubnet"] is True and by_name["ded-a"]["subnetIds"] == [subnet]
    assert by_name["ded-a"]["availabilityZones"] == ["us-west-2b"]
    assert by_name["accelerated-cap2"]["capacityType"] == "OnDemand"
    assert not any(g["karpenterManaged"] for g in listing["instanceGroups"])
    assert listing["nodeGroups"] == []
