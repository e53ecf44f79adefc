"""Agent-facing defaults: argument-less calls follow the creation just started, lookups answer for the
cluster's Region, and hyperpod_create reconciles a training plan's AZ before any AWS write."""

from __future__ import annotations

import time

from instantstart.store.db import Database
from instantstart.store.models import ClusterRow, StateRow
from instantstart.twin_process import TwinProcess
from tests.support.servers import Running
from tests.support.twin import twin_client


def seed(running: Running, tag: str, region: str, *, active: bool = False, eks_done: bool = False) -> None:
    """A cluster row as creation or import leaves it (and optionally the active-cluster choice)."""
    db = Database(running.database_url)
    with db.session() as session:
        session.add(
            ClusterRow(
                tag=tag,
                region=region,
                eks_cluster_name=f"eks-cluster-{tag}",
                hyperpod_cluster_name=f"hp-cluster-{tag}",
                stages={"eks": "SUCCEEDED"} if eks_done else {},
                details={},
            )
        )
        if active:
            session.add(StateRow(key="active_cluster", value=tag))
    db.dispose()


def test_zone_and_instance_lookups_answer_for_the_clusters_region(cp: Running, twin: TwinProcess) -> None:
    seed(cp, "far", "eu-west-1")
    with cp.client() as client:
        zones = client.get("/api/v1/availability-zones", params={"clusterTag": "far"}).json()
        assert zones["region"] == "eu-west-1", zones
        assert zones["availabilityZones"] and all(z["name"].startswith("eu-west-1") for z in zones["availabilityZones"])
        by_region = client.get("/api/v1/availability-zones", params={"region": "us-east-1"}).json()
        assert by_region["region"] == "us-east-1"
        assert all(z["name"].startswith("us-east-1") for z in by_region["availabilityZones"])
        instances = client.get("/api/v1/instances", params={"clusterTag": "far"}).json()
        assert instances["region"] == "eu-west-1", instances
        # No argument: the active (here: the only, just-chosen) cluster's Region, not the server's.
        seed(cp, "near", "us-east-2", active=True)
        assert client.get("/api/v1/availability-zones").json()["region"] == "us-east-2"


def test_argumentless_status_follows_the_creation_just_started(cp: Running, twin: TwinProcess) -> None:
    seed(cp, "old", "us-west-2", active=True, eks_done=True)
    with cp.client() as client:
        ref = client.post("/api/v1/tools/cluster_create_eks", json={"clusterTag": "new"}).json()
        assert ref["statusTool"] == "cluster_get_eks_creation_status", ref
        seen = client.post("/api/v1/tools/cluster_get_eks_creation_status", json={}).json()
        assert seen["clusterTag"] == "new", seen
        assert client.post("/api/v1/tools/cluster_list_all", json={}).json()["activeCluster"] == "old"
        deadline = time.monotonic() + 120
        while not seen["terminal"] and time.monotonic() < deadline:
            client.post("/api/v1/tools/wait_seconds", json={"seconds": 1})
            seen = client.post("/api/v1/tools/cluster_get_eks_creation_status", json={}).json()
            assert seen["clusterTag"] == "new", seen
        # Terminal, and the poll after that still answers for the new cluster.
        assert seen["terminal"] and seen["state"] == "SUCCEEDED", seen
        again = client.post("/api/v1/tools/cluster_get_eks_creation_status", json={}).json()
        assert again["clusterTag"] == "new"
        # Choosing a cluster makes the active one the default again.
        switch = client.post("/api/v1/tools/cluster_switch", json={"clusterTag": "old"}).json()
        assert "operationId" in switch


def test_hyperpod_create_reconciles_a_training_plan_az_before_any_write(cp: Running, twin: TwinProcess) -> None:
    seed(cp, "plan", "us-west-2", active=True, eks_done=True)
    sm = twin_client(twin, "sagemaker")
    offerings = sm.search_training_plan_offerings(
        InstanceType="ml.p5.48xlarge", InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"]
    )["TrainingPlanOfferings"]
    offering = next(o for o in offerings if o["ReservedCapacityOfferings"][0]["AvailabilityZone"] != "us-west-2a")
    plan_az = offering["ReservedCapacityOfferings"][0]["AvailabilityZone"]
    arn = sm.create_training_plan(
        TrainingPlanName="tp-agent", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"]
    )["TrainingPlanArn"]
    body = {
        "AcceleratedInstanceType": "ml.p5.48xlarge",
        "AcceleratedInstanceCount": 1,
        "availabilityZone": "us-west-2a",
        "AcceleratedTrainingPlanArn": arn,
    }
    with cp.client() as client:
        refused = client.post("/api/v1/clusters/hyperpod", json={**body, "strictAvailabilityZone": True})
        assert refused.status_code == 422, refused.text
        assert (
            plan_az in refused.json()["error"]["message"] and "availabilityZone" in refused.json()["error"]["message"]
        )
        assert client.get("/api/v1/operations").json()["total"] == 0
        wrong_type = client.post("/api/v1/clusters/hyperpod", json={**body, "AcceleratedInstanceType": "ml.g6.4xlarge"})
        assert wrong_type.status_code == 422 and "acceleratedInstanceType" in wrong_type.text
        assert sm.list_clusters()["ClusterSummaries"] == []
        placed = client.post("/api/v1/clusters/hyperpod", json=body)
        assert placed.status_code == 202, placed.text
        view = client.get(f"/api/v1/operations/{placed.json()['operationId']}").json()
    hyperpod = view["params"]["hyperpod"]
    assert hyperpod["availabilityZone"] == plan_az and any(plan_az in n for n in hyperpod["notes"]), hyperpod
