"""Adopting an existing FSx for Lustre file system (fsx_storage_create fileSystemId) on the twin: refused when it
is in another VPC, refused naming the missing Lustre rules when its security group does not let the cluster's
nodes in (the hint names the rule and allowLustreFromNodes); adopted when the rules are there, or after
InstantStart adds them to a group with the cluster tag (an operator's untagged group: refused, naming the
commands). The twin's FSx CSI node plugin enforces the same rules: a pod on a file system the nodes cannot reach
stays ContainerCreating with a FailedMount event until the rules exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.flows import claim_pod, hand_made_fsx_claim, kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import until

TAG = "fsx2"



def _static_claim(core: k8s.CoreV1Api, name: str, fs: dict[str, Any]) -> None:
    """A PV and claim on `fs` made by hand (what a user with kubectl could do)."""
    hand_made_fsx_claim(core, name, {"driver": "fsx.csi.aws.com", "volumeHandle": fs["FileSystemId"],
                                     "volumeAttributes": {"dnsname": fs["DNSName"],
                                                          "mountname": fs["LustreConfiguration"]["MountName"]}})


def _failed_mounts(core: k8s.CoreV1Api, pod: str) -> list[str]:
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={pod}").items
    return [e.message for e in events if e.reason == "FailedMount"]


def _lustre_group(ec2: Any, vpc_id: str, name: str, sources: dict[tuple[int, int], str]) -> str:
    """A user's security group allowing TCP (from, to) from the given source group."""
    group = ec2.create_security_group(GroupName=name, Description="user lustre", VpcId=vpc_id)["GroupId"]
    if sources:
        ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": low, "ToPort": high, "UserIdGroupPairs": [{"GroupId": src}]}
            for (low, high), src in sources.items()])
    return str(group)


def _file_system(fsx: Any, subnet: str, groups: list[str]) -> dict[str, Any]:
    made = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
                                  SecurityGroupIds=groups, LustreConfiguration={"DeploymentType": "SCRATCH_2"})
    fs_id = made["FileSystem"]["FileSystemId"]
    return dict(until(lambda: next((f for f in fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
                                    if f["Lifecycle"] == "AVAILABLE"), None), f"{fs_id} AVAILABLE", timeout=120))


def test_adopting_checks_the_vpc_and_the_lustre_rules(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)
    core = kube(twin, tmp_path, TAG)
    fsx: Any = twin_client(twin, "fsx")
    ec2: Any = twin_client(twin, "ec2")
    mine = [{"Name": "tag:instantstart:cluster-tag", "Values": [TAG]}]
    node_group = ec2.describe_security_groups(
        Filters=[*mine, {"Name": "tag:instantstart:role", "Values": ["cluster-sg"]}])["SecurityGroups"][0]["GroupId"]
    compute = ec2.describe_subnets(
        Filters=[*mine, {"Name": "tag:instantstart:role", "Values": ["compute-us-west-2c"]}])["Subnets"][0]
    vpc_id = compute["VpcId"]
    # The compute subnet's new route table went onto the cluster's own S3 endpoint (one endpoint, not a second).
    compute_table = ec2.describe_route_tables(Filters=[{"Name": "association.subnet-id",
                                                        "Values": [compute["SubnetId"]]}])["RouteTables"][0]
    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["VpcEndpoints"]
    assert len(endpoints) == 1 and compute_table["RouteTableId"] in endpoints[0]["RouteTableIds"], endpoints

    # A file system in another VPC: refused, naming both VPCs.
    other_vpc = ec2.create_vpc(CidrBlock="10.77.0.0/16")["Vpc"]["VpcId"]
    other_subnet = ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.77.1.0/24",
                                     AvailabilityZone="us-west-2c")["Subnet"]["SubnetId"]
    elsewhere = _file_system(fsx, other_subnet, [])
    refused = mcp_raw(cp, [("fsx_storage_create", {"name": "far", "fileSystemId": elsewhere["FileSystemId"],
                                                   "enableCsiDriver": True})])[0]
    error = refused["payload"]["error"]
    assert refused["isError"] and error["code"] == "INVALID_INPUT", refused
    assert "fileSystemId" in error["message"] and other_vpc in error["message"] and vpc_id in error["message"]

    # In the cluster's VPC, but its group lets the nodes reach only port 988: refused, naming what is missing.
    partial = _lustre_group(ec2, vpc_id, "user-partial", {(988, 988): node_group})
    gated = _file_system(fsx, compute["SubnetId"], [partial])
    refused = mcp_raw(cp, [("fsx_storage_create", {"name": "gated", "fileSystemId": gated["FileSystemId"],
                                                   "enableCsiDriver": True})])[0]
    error = refused["payload"]["error"]
    assert refused["isError"] and error["code"] == "PRECONDITION_FAILED", refused
    assert "TCP 1018-1023 missing" in error["message"] and node_group in error["message"], error
    assert partial in error["hint"] and node_group in error["hint"] and "allowLustreFromNodes" in error["hint"]
    assert error["details"]["missingPorts"] == ["1018-1023"]
    assert fsx.describe_file_systems(FileSystemIds=[gated["FileSystemId"]])["FileSystems"][0]["Lifecycle"] == \
        "AVAILABLE"  # nothing touched

    # The good path: a group allowing both ranges from the nodes; adopted as is (no rule added), mounted.
    full = _lustre_group(ec2, vpc_id, "user-full", {(988, 988): node_group, (1018, 1023): node_group})
    good = _file_system(fsx, compute["SubnetId"], [full])
    ref = mcp_calls(cp, [("fsx_storage_create", {"name": "good", "fileSystemId": good["FileSystemId"],
                                                 "enableCsiDriver": True})])[0]
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    out = view["stages"][1]["outputs"]
    assert out["created"] is False and out["lustreRulesAddedTo"] is None
    rules = ec2.describe_security_groups(GroupIds=[full])["SecurityGroups"][0]["IpPermissions"]
    assert len(rules) == 2, rules
    core.create_namespaced_pod("default", claim_pod("reader", "good"))
    until(lambda: core.read_namespaced_pod("reader", "default").status.phase == "Running", "reader Running")

    # The twin's CSI node plugin: a hand-made claim on the gated file system cannot mount (the mount hangs on the
    # blocked ports): ContainerCreating with FailedMount, as kubelet reports it.
    _static_claim(core, "byhand", gated)
    core.create_namespaced_pod("default", claim_pod("stuck", "byhand"))
    message = until(lambda: _failed_mounts(core, "stuck"), "a FailedMount event")[0]
    assert "DeadlineExceeded" in message and "byhand-pv" in message, message
    stuck = core.read_namespaced_pod("stuck", "default").status
    assert stuck.phase == "Pending" and stuck.container_statuses[0].state.waiting.reason == "ContainerCreating"

    # Asked to add the rules to the operator's group (no cluster tag): refused up front with the commands to run or
    # the tag that lets InstantStart do it; nothing changed (IAM would refuse the control plane's call anyway).
    refused = mcp_raw(cp, [("fsx_storage_create", {"name": "gated", "fileSystemId": gated["FileSystemId"],
                                                   "allowLustreFromNodes": True})])[0]
    error = refused["payload"]["error"]
    assert refused["isError"] and error["code"] == "PRECONDITION_FAILED", refused
    assert partial in error["message"] and "instantstart:cluster-tag" in error["message"], error
    assert (f"aws ec2 authorize-security-group-ingress --region us-west-2 --group-id {partial} --protocol tcp "
            f"--port 1018-1023 --source-group {node_group}") in error["hint"], error
    assert "--port 988 " not in error["hint"]  # 988 is there already
    assert f"--resources {partial} --tags Key=instantstart:cluster-tag,Value={TAG}" in error["hint"], error
    assert len(ec2.describe_security_groups(GroupIds=[partial])["SecurityGroups"][0]["IpPermissions"]) == 1

    # Tagged by the operator, the group is InstantStart's to change: it adds the rules; the waiting pod mounts it.
    ec2.create_tags(Resources=[partial], Tags=[{"Key": "instantstart:cluster-tag", "Value": TAG}])
    ref = mcp_calls(cp, [("fsx_storage_create", {"name": "gated", "fileSystemId": gated["FileSystemId"],
                                                 "allowLustreFromNodes": True})])[0]
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    assert view["stages"][1]["outputs"]["lustreRulesAddedTo"] == partial
    group = ec2.describe_security_groups(GroupIds=[partial])["SecurityGroups"][0]
    allowed = {(p["FromPort"], p["ToPort"], g["GroupId"]) for p in group["IpPermissions"]
               for g in p.get("UserIdGroupPairs", [])}
    assert {(988, 988, node_group), (1018, 1023, node_group)} <= allowed, allowed
    until(lambda: core.read_namespaced_pod("stuck", "default").status.phase == "Running", "stuck pod Running",
          timeout=90)


def test_an_intelligent_tiering_file_system_end_to_end(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    """StorageType INTELLIGENT_TIERING: refused naming the allowed values before anything is made; created with
    ThroughputCapacity and its read cache and no StorageCapacity; the claim Bound and mounted."""
    tag = "fsx3"
    with cp.client() as client:
        make_hyperpod(client, tag)
    core = kube(twin, tmp_path, tag)
    fsx: Any = twin_client(twin, "fsx")
    bad = mcp_raw(cp, [("fsx_storage_create", {"name": "tiered", "storageType": "INTELLIGENT_TIERING",
                                               "throughputCapacity": 6000})])[0]
    message = bad["payload"]["error"]["message"]
    assert bad["isError"] and "throughputCapacity" in message and "a multiple of 4000 up to 2000000" in message
    assert fsx.describe_file_systems()["FileSystems"] == []

    ref = mcp_calls(cp, [("fsx_storage_create", {"name": "tiered", "storageType": "INTELLIGENT_TIERING",
                                                 "throughputCapacity": 4000, "readCacheSizingMode": "USER_PROVISIONED",
                                                 "readCacheSizeGib": 64, "enableCsiDriver": True})])[0]
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    out = view["stages"][1]["outputs"]
    assert out["storageType"] == "INTELLIGENT_TIERING" and out["throughputCapacity"] == 4000
    fs = fsx.describe_file_systems(FileSystemIds=[out["fileSystemId"]])["FileSystems"][0]
    assert fs["StorageType"] == "INTELLIGENT_TIERING" and "StorageCapacity" not in fs
    lustre = fs["LustreConfiguration"]
    assert lustre["DeploymentType"] == "PERSISTENT_2" and lustre["ThroughputCapacity"] == 4000
    assert lustre["DataReadCacheConfiguration"] == {"SizingMode": "USER_PROVISIONED", "SizeGiB": 64}
    assert lustre["MetadataConfiguration"] == {"Mode": "USER_PROVISIONED", "Iops": 6000}
    assert "PerUnitStorageThroughput" not in lustre
    listed = {c["name"]: c for c in mcp_calls(cp, [("fsx_storage_list", {})])[0]["claims"]}
    assert listed["tiered"]["fileSystem"]["throughputCapacity"] == 4000
    assert listed["tiered"]["fileSystem"]["storageType"] == "INTELLIGENT_TIERING"
    assert core.read_namespaced_persistent_volume_claim("tiered", "default").status.phase == "Bound"
    core.create_namespaced_pod("default", claim_pod("tier-reader", "tiered"))
    until(lambda: core.read_namespaced_pod("tier-reader", "default").status.phase == "Running", "reader Running")
