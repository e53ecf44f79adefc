"""FSx for Lustre volumes through MCP and REST on the twin: refused without the CSI driver (with the hint) and
for bad Lustre options (naming the allowed values); created with the driver enabled in the same call, the
Lustre security group from the nodes, AVAILABLE waited for, the claim Bound and mounted by a pod; an existing
file system adopted; storage_delete removes only what we created; cluster deletion removes the rest."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from instantstart.twin_process import TwinProcess
from tests.support.flows import claim_pod, kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait, tagged_leftovers
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

TAG = "fsx1"



def wait_phase(core: k8s.CoreV1Api, name: str, phase: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while core.read_namespaced_pod(name, "default").status.phase != phase:
        assert time.monotonic() < deadline, f"{name} never {phase}"
        time.sleep(0.2)


def failed_mounts(core: k8s.CoreV1Api, pod: str) -> list[str]:
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={pod}").items
    return [e.message for e in events if e.reason == "FailedMount"]


def lustre_rules(ec2: Any, group_id: str) -> set[tuple[int, int, str]]:
    group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    return {(p["FromPort"], p["ToPort"], g["GroupId"]) for p in group["IpPermissions"] if p.get("IpProtocol") == "tcp"
            for g in p.get("UserIdGroupPairs", [])}


def test_fsx_create_adopt_mount_delete(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)
    core = kube(twin, tmp_path, TAG)
    fsx: Any = twin_client(twin, "fsx")
    ec2: Any = twin_client(twin, "ec2")

    # Bad Lustre options are refused before anything is created, naming the field and the allowed values.
    bad = mcp_raw(cp, [("fsx_storage_create", {"perUnitStorageThroughput": 300})])[0]
    assert bad["isError"] and bad["payload"]["error"]["code"] == "INVALID_INPUT", bad
    message = bad["payload"]["error"]["message"]
    assert "perUnitStorageThroughput" in message and "125, 250, 500, 1000" in message, message
    size = mcp_raw(cp, [("fsx_storage_create", {"deploymentType": "SCRATCH_2", "storageCapacity": 3000})])[0]
    assert size["isError"] and "storageCapacity" in size["payload"]["error"]["message"]
    assert "1200, 2400, or a multiple of 2400" in size["payload"]["error"]["message"]
    scratch_tput = mcp_raw(cp, [("fsx_storage_create", {"deploymentType": "SCRATCH_2",
                                                         "perUnitStorageThroughput": 125})])[0]
    assert scratch_tput["isError"] and "takes no throughput" in scratch_tput["payload"]["error"]["message"]
    hdd = mcp_raw(cp, [("fsx_storage_create", {"storageType": "HDD"})])[0]
    assert hdd["isError"] and "PERSISTENT_1" in hdd["payload"]["error"]["hint"]
    # The FSx CSI driver is not on the cluster: refused with the hint to enable it (here or in the same call).
    refused = mcp_raw(cp, [("fsx_storage_create", {})])[0]
    assert refused["isError"] and refused["payload"]["error"]["code"] == "PRECONDITION_FAILED"
    assert "enableCsiDriver" in refused["payload"]["error"]["hint"]
    assert fsx.describe_file_systems()["FileSystems"] == []

    # Created with the driver enabled in the same operation.
    ref = mcp_calls(cp, [("fsx_storage_create", {"name": "train", "enableCsiDriver": True,
                                                 "perUnitStorageThroughput": 500})])[0]
    assert ref["statusTool"] == "operation_get"
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view
    stages = {s["name"]: s for s in view["stages"]}
    assert stages["csi-driver"]["outputs"]["enabled"] is True
    out = stages["filesystem"]["outputs"]
    assert out["created"] is True and out["lifecycle"] == "AVAILABLE"
    assert stages["filesystem"]["message"] == f"file system {out['fileSystemId']}: AVAILABLE"
    fs_id = out["fileSystemId"]
    fs = fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"][0]
    assert fs["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    assert fs["LustreConfiguration"]["PerUnitStorageThroughput"] == 500 and fs["StorageCapacity"] == 1200
    compute = ec2.describe_subnets(SubnetIds=fs["SubnetIds"])["Subnets"][0]  # the cluster's compute subnet
    assert {"Key": "instantstart:role", "Value": "compute-us-west-2c"} in compute["Tags"], compute
    tags = {t["Key"]: t["Value"] for t in fs["Tags"]}
    assert tags["instantstart:cluster-tag"] == TAG and tags["instantstart:operation-id"] == ref["operationId"]
    # Its security group lets Lustre in from itself and from the cluster's node security group.
    group = out["securityGroupId"]
    node_groups = ec2.describe_security_groups(
        Filters=[{"Name": "tag:instantstart:role", "Values": ["cluster-sg"]},
                 {"Name": "tag:instantstart:cluster-tag", "Values": [TAG]}])["SecurityGroups"]
    node_group = node_groups[0]["GroupId"]
    assert lustre_rules(ec2, group) == {(988, 988, group), (988, 988, node_group),
                                        (1018, 1023, group), (1018, 1023, node_group)}
    # The static PV and the Bound claim.
    pv = core.read_persistent_volume("train-pv")
    assert pv.spec.csi.driver == "fsx.csi.aws.com" and pv.spec.csi.volume_handle == fs_id
    assert pv.spec.csi.volume_attributes == {"dnsname": fs["DNSName"],
                                             "mountname": fs["LustreConfiguration"]["MountName"]}
    assert pv.spec.persistent_volume_reclaim_policy == "Retain" and pv.spec.mount_options == ["flock"]
    assert core.read_namespaced_persistent_volume_claim("train", "default").status.phase == "Bound"
    # Re-running with the same values is a no-op on the same file system.
    again = mcp_wait(cp, mcp_calls(cp, [("fsx_storage_create", {"name": "train",
                                                                  "perUnitStorageThroughput": 500})])[0]["operationId"])
    assert again["status"] == "SUCCEEDED" and again["stages"][1]["outputs"]["fileSystemId"] == fs_id
    assert len(fsx.describe_file_systems()["FileSystems"]) == 1

    # A pod mounts it (the simulated CSI node plugin checks the file system behind the PV).
    core.create_namespaced_pod("default", claim_pod("reader", "train"))
    wait_phase(core, "reader", "Running")

    # An existing file system, made outside InstantStart, is adopted and never deleted by us.
    made = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=fs["SubnetIds"],
                                  LustreConfiguration={"DeploymentType": "SCRATCH_2"})["FileSystem"]
    # (It has the VPC's default security group, which lets the nodes in only once the Lustre rules are added; the
    # operator tags that group with the cluster tag so InstantStart may add them: IAM allows ingress only there.)
    default_group = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [compute["VpcId"]]},
                                                          {"Name": "group-name", "Values": ["default"]}])
    ec2.create_tags(Resources=[default_group["SecurityGroups"][0]["GroupId"]],
                    Tags=[{"Key": "instantstart:cluster-tag", "Value": TAG}])
    adopt_ref = mcp_calls(cp, [("fsx_storage_create", {"name": "shared", "fileSystemId": made["FileSystemId"],
                                                       "allowLustreFromNodes": True})])[0]
    adopt = mcp_wait(cp, adopt_ref["operationId"])
    assert adopt["status"] == "SUCCEEDED", adopt
    assert adopt["stages"][1]["outputs"]["created"] is False
    missing = mcp_raw(cp, [("fsx_storage_create", {"name": "nope", "fileSystemId": "fs-0123456789abcdef0"})])[0]
    assert missing["isError"] and missing["payload"]["error"]["code"] == "NOT_FOUND", missing

    # A PV naming a file system that does not exist: the pod waits in ContainerCreating with FailedMount.
    ghost = {"driver": "fsx.csi.aws.com", "volumeHandle": "fs-00000000000000000",
             "volumeAttributes": {"dnsname": "fs-00000000000000000.fsx", "mountname": "abcdefgh"}}
    core.create_persistent_volume({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "ghost-pv"},
                                   "spec": {"capacity": {"storage": "1200Gi"}, "accessModes": ["ReadWriteMany"],
                                            "storageClassName": "", "csi": ghost,
                                            "claimRef": {"namespace": "default", "name": "ghost"}}})
    core.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "ghost"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "ghost-pv",
                 "resources": {"requests": {"storage": "1200Gi"}}}})
    core.create_namespaced_pod("default", claim_pod("stuck", "ghost"))
    deadline = time.monotonic() + 60
    while not failed_mounts(core, "stuck"):
        assert time.monotonic() < deadline, "no FailedMount event"
        time.sleep(0.2)
    assert "mount.lustre" in failed_mounts(core, "stuck")[0]
    assert core.read_namespaced_pod("stuck", "default").status.phase == "Pending"

    # fsx_storage_list (REST and MCP answer the same): both claims with their file systems.
    listing = mcp_calls(cp, [("fsx_storage_list", {})])[0]
    with cp.client() as client:
        rest = client.get("/api/v1/storage/fsx").json()
    assert rest == listing
    claims = {c["name"]: c for c in listing["claims"]}
    assert set(claims) == {"train", "shared", "ghost"}
    assert claims["train"]["fileSystem"]["createdByInstantstart"] is True
    assert claims["train"]["fileSystem"]["lifecycle"] == "AVAILABLE"
    assert claims["train"]["mountedBy"] == ["default/reader"]
    assert claims["train"]["fileSystem"]["perUnitStorageThroughput"] == 500
    assert claims["shared"]["fileSystem"]["createdByInstantstart"] is False
    assert claims["ghost"]["fileSystem"]["lifecycle"] is None
    kinds = {c["name"]: c["type"] for c in mcp_calls(cp, [("storage_list", {})])[0]["claims"]}
    assert kinds == {"train": "fsx", "shared": "fsx", "ghost": "fsx"}

    # storage_delete: refused while mounted; then the claim, and the file system we made with its group.
    busy = mcp_raw(cp, [("storage_delete", {"name": "train"})])[0]
    assert busy["isError"] and "default/reader" in busy["payload"]["error"]["message"]
    core.delete_namespaced_pod("reader", "default", grace_period_seconds=0, _preload_content=False)
    core.delete_namespaced_pod("stuck", "default", grace_period_seconds=0, _preload_content=False)
    deadline = time.monotonic() + 60
    while core.list_namespaced_pod("default").items:
        assert time.monotonic() < deadline, "pods never went"
        time.sleep(0.2)
    gone = mcp_calls(cp, [("storage_delete", {"name": "train"})])[0]
    assert gone["deletedClaim"] is True and gone["fileSystemId"] == fs_id
    deletion = mcp_wait(cp, gone["fileSystemDeletion"]["operationId"])
    assert deletion["status"] == "SUCCEEDED", deletion
    assert [f["FileSystemId"] for f in fsx.describe_file_systems()["FileSystems"]] == [made["FileSystemId"]]
    assert ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [group]}])["SecurityGroups"] == []
    kept = mcp_calls(cp, [("storage_delete", {"name": "shared"})])[0]
    assert kept["fileSystemDeletion"] is None and kept["fileSystemId"] == made["FileSystemId"]
    assert fsx.describe_file_systems(FileSystemIds=[made["FileSystemId"]])["FileSystems"][0]["Lifecycle"] == "AVAILABLE"

    # The user's own file system sits in our compute subnet: it has to go before the cluster can.
    fsx.delete_file_system(FileSystemId=made["FileSystemId"])
    deadline = time.monotonic() + 60
    while fsx.describe_file_systems()["FileSystems"]:
        assert time.monotonic() < deadline, "the adopted file system never went"
        time.sleep(0.2)

    # Cluster deletion removes a file system we created (and its security group), after its claim.
    last = mcp_wait(cp, mcp_calls(cp, [("fsx_storage_create", {"name": "scratch", "deploymentType": "SCRATCH_2",
                                                                 "storageCapacity": 2400})])[0]["operationId"])
    assert last["status"] == "SUCCEEDED", last
    with cp.client() as client:
        plan = client.get(f"/api/v1/clusters/{TAG}/deletion-plan").json()
        planned = [r["resourceType"] for r in plan["resources"]]
        assert planned.index("fsx:file-system") > planned.index("sagemaker:cluster")
        assert planned.index("fsx:file-system") < planned.index("ec2:security-group")
        go = client.post(f"/api/v1/clusters/{TAG}/delete", json={"planDigest": plan["planDigest"]}).json()
        assert wait_terminal(client, go["operationId"], timeout=300)["status"] == "SUCCEEDED"
    leftovers = tagged_leftovers(twin, TAG)
    assert all(not v for v in leftovers.values()), leftovers
    assert fsx.describe_file_systems()["FileSystems"] == []
