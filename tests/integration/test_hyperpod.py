"""The HyperPod stage against the twin: creation to InService, capacity shortage and retry, bad input."""

from __future__ import annotations

from typing import Any

import httpx

from instantstart.twin_process import TwinProcess
from tests.support.flows import make_eks
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal


def test_hyperpod_create_reaches_in_service(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        make_eks(client, "hp1")
        ref = client.post(
            "/api/v1/clusters/hyperpod",
            json={
                "AcceleratedInstanceType": "ml.g6.4xlarge",
                "AcceleratedInstanceCount": 1,
                "availabilityZone": "us-west-2c",
                "onStartDeepHealthChecks": True,
            },
        )
        assert ref.status_code == 202, ref.text
        view = wait_terminal(client, ref.json()["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED", view
        status = client.get("/api/v1/clusters/hyperpod-status").json()
        assert status["state"] == "SUCCEEDED" and status["resourceStatus"] == "InService"
    sm: Any = twin_client(twin, "sagemaker")
    cluster = sm.describe_cluster(ClusterName="hp-cluster-hp1")
    assert cluster["NodeRecovery"] == "Automatic"
    assert cluster["NodeProvisioningMode"] == "Continuous"
    group = cluster["InstanceGroups"][0]
    assert group["InstanceGroupName"] == "accelerated-hp1" and group["CurrentCount"] == 1
    assert group["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert group["ThreadsPerCore"] == 1
    nodes = sm.list_cluster_nodes(ClusterName="hp-cluster-hp1")["ClusterNodeSummaries"]
    assert len(nodes) == 1 and nodes[0]["InstanceStatus"]["Status"] == "Running"
    ec2: Any = twin_client(twin, "ec2")
    subnet = ec2.describe_subnets(SubnetIds=[view["stages"][0]["outputs"]["computeSubnetId"]])["Subnets"][0]
    assert subnet["AvailabilityZone"] == "us-west-2c" and subnet["CidrBlock"].endswith("/20")
    s3: Any = twin_client(twin, "s3")
    bucket = next(
        t
        for t in cluster["InstanceGroups"][0]["LifeCycleConfig"]["SourceS3Uri"].split("/")
        if t.startswith("instantstart-")
    )
    assert (
        s3.get_object(Bucket=bucket, Key="lifecycle/hp1/on_create.sh")["Body"]
        .read()
        .startswith(b"#!/bin/bash")
    )


def test_capacity_shortage_fails_with_a_hint_and_retry_completes(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        make_eks(client, "hp2")
        fault = httpx.post(
            twin.endpoint_url + "/_twin/faults",
            json={"kind": "insufficient_capacity", "instance_type": "ml.g6.4xlarge", "availability_zone": "us-west-2c"},
        )
        assert fault.status_code in (200, 201), fault.text
        ref = client.post(
            "/api/v1/clusters/hyperpod",
            json={
                "acceleratedInstanceType": "ml.g6.4xlarge",
                "acceleratedInstanceCount": 1,
                "availabilityZone": "us-west-2c",
            },
        ).json()
        view = wait_terminal(client, ref["operationId"], timeout=120)
        assert view["status"] == "FAILED"
        assert view["error"]["code"] == "CAPACITY_UNAVAILABLE" and "Availability Zone" in view["error"]["hint"]
        status = client.get("/api/v1/clusters/hyperpod-status").json()
        assert status["state"] == "FAILED" and status["error"]["code"] == "CAPACITY_UNAVAILABLE"
        clusters = client.get("/api/v1/clusters").json()["clusters"]
        assert clusters[0]["stages"]["eks"] == "SUCCEEDED"
        httpx.delete(twin.endpoint_url + "/_twin/faults").raise_for_status()
        client.post(f"/api/v1/operations/{ref['operationId']}/retry").raise_for_status()
        view = wait_terminal(client, ref["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED", view
    sm: Any = twin_client(twin, "sagemaker")
    assert len(sm.list_clusters()["ClusterSummaries"]) == 1


def test_bad_hyperpod_input_is_refused_up_front(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        early = client.post(
            "/api/v1/clusters/hyperpod",
            json={
                "AcceleratedInstanceType": "ml.g6.4xlarge",
                "AcceleratedInstanceCount": 1,
                "availabilityZone": "us-west-2a",
            },
        )
        assert early.status_code == 412  # no active cluster yet
        make_eks(client, "hp3")
        cases = [
            ({"AcceleratedInstanceType": "ml.g6.4xlarg"}, "acceleratedInstanceType", "unknown"),
            ({"availabilityZone": "us-east-1a"}, "availabilityZone", "not an Availability Zone"),
            ({"AcceleratedInstanceCount": -1}, "AcceleratedInstanceCount", "greater than or equal"),
        ]
        base = {
            "AcceleratedInstanceType": "ml.g6.4xlarge",
            "AcceleratedInstanceCount": 1,
            "availabilityZone": "us-west-2c",
        }
        for change, field, text in cases:
            response = client.post("/api/v1/clusters/hyperpod", json={**base, **change})
            assert response.status_code == 422, response.text
            message = response.json()["error"]["message"]
            assert field in message and text in message, message
    sm: Any = twin_client(twin, "sagemaker")
    assert sm.list_clusters()["ClusterSummaries"] == []
