"""Shared test flows against the twin: clusters made through the API, MCP calls, Kubernetes clients, leftovers."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as k8s

from instantstart.aws.clients import AwsClients
from instantstart.kube.client import KubeClients
from instantstart.settings import Settings
from instantstart.twin_process import TwinProcess
from tests.support.faces import mcp_http
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

TAG = "instantstart:cluster-tag"


def make_eks(client: httpx.Client, tag: str) -> None:
    """The EKS stage done and the cluster active."""
    ref = client.post("/api/v1/clusters/eks", json={"clusterTag": tag}).json()
    assert wait_terminal(client, ref["operationId"], timeout=120)["status"] == "SUCCEEDED"
    switch = client.post(f"/api/v1/clusters/{tag}/switch").json()
    assert wait_terminal(client, switch["operationId"], timeout=60)["status"] == "SUCCEEDED"


def make_hyperpod(client: httpx.Client, tag: str, **extra: Any) -> None:
    """EKS stage, switch, and a HyperPod cluster with one ml.g6.4xlarge node in us-west-2c."""
    make_eks(client, tag)
    body = {"acceleratedInstanceType": "ml.g6.4xlarge", "acceleratedInstanceCount": 1,
            "availabilityZone": "us-west-2c", **extra}
    ref = client.post("/api/v1/clusters/hyperpod", json=body)
    assert ref.status_code == 202, ref.text
    view = wait_terminal(client, ref.json()["operationId"], timeout=120)
    assert view["status"] == "SUCCEEDED", view


def add_group(client: httpx.Client, **body: Any) -> dict[str, Any]:
    """hyperpod_add_instance_group through REST, to a terminal state; the operation view."""
    ref = client.post("/api/v1/capacity/instance-groups", json=body)
    assert ref.status_code == 202, ref.text
    assert ref.json()["statusTool"] == "operation_get"
    return wait_terminal(client, ref.json()["operationId"], timeout=120)


def tool_payload(result: Any) -> dict[str, Any]:
    """The JSON payload of an MCP tool result, which must not be an error."""
    payload: dict[str, Any] = json.loads(result.content[0].text)
    assert not result.is_error, payload
    return payload


def mcp_raw(cp: Running, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Tool calls that may fail, as {isError, payload}; then the first tool's description."""

    async def run() -> list[Any]:
        async with mcp_http(cp) as session:
            out: list[Any] = []
            for tool, args in calls:
                result = await session.call_tool(tool, args)
                out.append({"isError": result.is_error, "payload": json.loads(result.content[0].text)})
            tools = {t.name: t for t in (await session.list_tools()).tools}
            out.append(tools[calls[0][0]].description)
            return out

    return asyncio.run(run())


def mcp_calls(cp: Running, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Tool calls in one MCP session (streamable HTTP); their payloads."""

    async def run() -> list[dict[str, Any]]:
        async with mcp_http(cp) as session:
            return [tool_payload(await session.call_tool(tool, args)) for tool, args in calls]

    return asyncio.run(run())


# Between MCP status polls: an agent calls wait_seconds (whole seconds, >= 1; test_agent_path and the skill replays
# exercise that), but a test only needs the condition, and a 1 s step added ~0.5 s of idle time to every wait.
MCP_POLL_SECONDS = 0.1


def mcp_wait(cp: Running, operation_id: str, limit: float = 240) -> dict[str, Any]:
    """Poll operation_get over MCP until the operation is terminal (within `limit` seconds)."""

    async def run() -> dict[str, Any]:
        deadline = time.monotonic() + limit
        async with mcp_http(cp) as session:
            while True:
                view = tool_payload(await session.call_tool("operation_get", {"operationId": operation_id}))
                if view["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                    return view
                if time.monotonic() >= deadline:
                    raise AssertionError(f"{operation_id} never finished: {view}")
                await asyncio.sleep(MCP_POLL_SECONDS)

    return asyncio.run(run())


def kube(twin: TwinProcess, tmp_path: Path, tag: str) -> k8s.CoreV1Api:
    """A Kubernetes client for the cluster's EKS API server (EKS token, as the control plane makes it)."""
    settings = Settings(data_dir=tmp_path / "kube", aws_endpoint_url=twin.endpoint_url,
                        aws_region=twin.env["AWS_REGION"])
    return k8s.CoreV1Api(KubeClients(AwsClients(settings)).api_client(f"eks-cluster-{tag}", twin.env["AWS_REGION"]))


def tagged_leftovers(twin: TwinProcess, tag: str) -> dict[str, list[str]]:
    """Everything in the twin that still carries the cluster tag (or the cluster's names)."""
    ec2: Any = twin_client(twin, "ec2")
    f = [{"Name": f"tag:{TAG}", "Values": [tag]}]
    iam: Any = twin_client(twin, "iam")
    roles = [
        r["RoleName"]
        for r in iam.list_roles()["Roles"]
        if any(t["Key"] == TAG and t["Value"] == tag for t in iam.list_role_tags(RoleName=r["RoleName"])["Tags"])
    ]
    eks: Any = twin_client(twin, "eks")
    sm: Any = twin_client(twin, "sagemaker")
    fsx: Any = twin_client(twin, "fsx")
    return {
        "vpcs": [v["VpcId"] for v in ec2.describe_vpcs(Filters=f)["Vpcs"]],
        "subnets": [s["SubnetId"] for s in ec2.describe_subnets(Filters=f)["Subnets"]],
        "nats": [
            n["NatGatewayId"]
            for n in ec2.describe_nat_gateways(Filters=f)["NatGateways"]
            # Check each gateway's own tags as well (the control plane does the same after every filter).
            if n["State"] != "deleted" and {"Key": TAG, "Value": tag} in n.get("Tags", [])
        ],
        "route_tables": [t["RouteTableId"] for t in ec2.describe_route_tables(Filters=f)["RouteTables"]],
        "igws": [g["InternetGatewayId"] for g in ec2.describe_internet_gateways(Filters=f)["InternetGateways"]],
        "endpoints": [e["VpcEndpointId"] for e in ec2.describe_vpc_endpoints(Filters=f)["VpcEndpoints"]
                      if e["State"].lower() not in ("deleting", "deleted")],
        "groups": [g["GroupId"] for g in ec2.describe_security_groups(Filters=f)["SecurityGroups"]],
        "eips": [a["AllocationId"] for a in ec2.describe_addresses(Filters=f)["Addresses"]],
        "roles": roles,
        "oidc": [
            p["Arn"]
            for p in iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]
            if any(
                t["Key"] == TAG and t["Value"] == tag
                for t in iam.list_open_id_connect_provider_tags(OpenIDConnectProviderArn=p["Arn"])["Tags"]
            )
        ],
        "eks": [c for c in eks.list_clusters()["clusters"] if c.endswith(tag)],
        "hyperpod": [
            c["ClusterName"] for c in sm.list_clusters()["ClusterSummaries"] if c["ClusterName"].endswith(tag)
        ],
        "fsx": [
            fs["FileSystemId"]
            for fs in fsx.describe_file_systems()["FileSystems"]
            if {"Key": TAG, "Value": tag} in fs.get("Tags", [])
        ],
    }


def changes_per_key(seen: list[tuple[str, str, Any]]) -> dict[str, list[str]]:
    """The watch event types an informer delivered, per object key, in order (after checking none repeats)."""
    assert len(seen) == len(set(seen)), seen
    per_key: dict[str, list[str]] = {}
    for kind, key, _ in seen:
        per_key.setdefault(key, []).append(kind)
    return per_key


def hand_made_fsx_claim(core: k8s.CoreV1Api, name: str, csi: dict[str, Any],
                        labels: dict[str, str] | None = None) -> None:
    """A static FSx PV `<name>-pv` with `csi` and its claim `name` in default, made by hand (what a user with kubectl
    could do), both with `labels` (none by default)."""
    meta = {"labels": labels or {}}
    core.create_persistent_volume({"apiVersion": "v1", "kind": "PersistentVolume",
                                   "metadata": {"name": f"{name}-pv", **meta},
                                   "spec": {"capacity": {"storage": "1200Gi"}, "accessModes": ["ReadWriteMany"],
                                            "storageClassName": "", "csi": csi,
                                            "claimRef": {"namespace": "default", "name": name}}})
    core.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, **meta},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": f"{name}-pv",
                 "resources": {"requests": {"storage": "1200Gi"}}}})


def claim_pod(name: str, claim: str, mount_path: str = "/fsx") -> dict[str, Any]:
    """A long-running pod that mounts the claim `claim` at `mount_path`."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"],
                                 "resources": {"requests": {"cpu": "10m"}},
                                 "volumeMounts": [{"name": "d", "mountPath": mount_path}]}],
                 "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}],
                 "tolerations": [{"operator": "Exists"}]},
    }


def hand_made_s3_claim(core: k8s.CoreV1Api, name: str, bucket: str, pv_labels: dict[str, str] | None = None) -> None:
    """A static S3 CSI PV `<name>-pv` and its claim `default/<name>`, made directly (not by InstantStart)."""
    core.create_persistent_volume({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{name}-pv", "labels": pv_labels or {}},
        "spec": {"capacity": {"storage": "1200Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "mountOptions": ["region us-west-2"], "claimRef": {"namespace": "default", "name": name},
                 "csi": {"driver": "s3.csi.aws.com", "volumeHandle": name,
                         "volumeAttributes": {"bucketName": bucket}}}})
    core.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": f"{name}-pv",
                 "resources": {"requests": {"storage": "1200Gi"}}}})
