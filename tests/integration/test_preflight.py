"""Decisions before creation: available instances per AZ with quota headroom, and typed preflight blockers."""

from __future__ import annotations

import httpx

from instantstart.twin_process import TwinProcess
from tests.support.servers import Running


def test_available_instances_and_zones(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        zones = client.get("/api/v1/availability-zones").json()
        assert zones["region"] == "us-west-2"
        names = [z["name"] for z in zones["availabilityZones"]]
        assert "us-west-2c" in names and all(z["id"].startswith("usw2-az") for z in zones["availabilityZones"])
        result = client.get("/api/v1/instances").json()
    by_type = {i["instanceType"]: i for i in result["instances"]}
    g6 = by_type["ml.g6.4xlarge"]
    assert g6["gpus"] == 1 and g6["accelerator"] == "L4"
    assert g6["availabilityZones"] and set(g6["availabilityZones"]) <= set(names)
    assert g6["quota"] is not None and g6["headroom"] == g6["quota"] - g6["inUse"]
    assert by_type["ml.p5.48xlarge"]["efaOnlyEligible"] is True


def test_plan_create_reports_typed_blockers(cp: Running, twin: TwinProcess) -> None:
    httpx.post(
        twin.endpoint_url + "/_twin/quotas", json={"instance_type": "ml.g6.4xlarge", "value": 2}
    ).raise_for_status()
    with cp.client() as client:
        ok = client.post(
            "/api/v1/clusters/plan",
            json={"instanceType": "ml.g6.4xlarge", "instanceCount": 2, "availabilityZone": "us-west-2c"},
        ).json()
        assert ok["ok"] is True and ok["blockers"] == []
        assert "service quotas" in ok["checked"]
        over = client.post(
            "/api/v1/clusters/plan",
            json={"instanceType": "ml.g6.4xlarge", "instanceCount": 3, "availabilityZone": "us-west-2c"},
        ).json()
        assert over["ok"] is False
        assert [b["code"] for b in over["blockers"]] == ["QUOTA_EXCEEDED"]
        assert "Service Quotas" in over["blockers"][0]["hint"] and over["blockers"][0]["field"] == "instanceCount"
        wrong_az = client.post(
            "/api/v1/clusters/plan",
            json={"instanceType": "ml.g6.4xlarge", "instanceCount": 1, "availabilityZone": "us-east-1a"},
        ).json()
        assert [b["code"] for b in wrong_az["blockers"]] == ["AZ_NOT_IN_REGION"]
        unknown = client.post(
            "/api/v1/clusters/plan",
            json={"instanceType": "ml.g9.huge", "instanceCount": 1, "availabilityZone": "us-west-2c"},
        )
        assert unknown.status_code == 422 and "instanceType" in unknown.json()["error"]["message"]
        cpu = client.post(
            "/api/v1/clusters/plan",
            json={"instanceType": "ml.m5.xlarge", "instanceCount": 1, "availabilityZone": "us-west-2a"},
        ).json()
        assert [w["code"] for w in cpu["warnings"]] == ["NO_ACCELERATOR"]


def test_plan_create_checks_the_training_plan_zone(cp: Running, twin: TwinProcess) -> None:
    import boto3

    sm = boto3.client("sagemaker", endpoint_url=twin.endpoint_url, region_name="us-west-2")
    offerings = sm.search_training_plan_offerings(
        InstanceType="ml.p5.48xlarge", InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"]
    )["TrainingPlanOfferings"]
    offering = offerings[0]
    plan_az = offering["ReservedCapacityOfferings"][0]["AvailabilityZone"]
    arn = sm.create_training_plan(
        TrainingPlanName="tp-preflight", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"]
    )["TrainingPlanArn"]
    other = next(z for z in ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d") if z != plan_az)
    with cp.client() as client:
        result = client.post(
            "/api/v1/clusters/plan",
            json={
                "instanceType": "ml.p5.48xlarge",
                "instanceCount": 1,
                "availabilityZone": other,
                "trainingPlanArn": arn,
            },
        ).json()
    codes = [b["code"] for b in result["blockers"]]
    assert "TRAINING_PLAN_AZ" in codes
    blocker = next(b for b in result["blockers"] if b["code"] == "TRAINING_PLAN_AZ")
    assert plan_az in blocker["hint"]
