"""S3 claims through MCP on the twin: a second claim with a prefix, a pod's writes under the mount listed as
objects (paged), storage_list with the mounting pod, and storage_delete refused while mounted, allowed after,
and refused for a claim made by hand (not ours)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from instantstart.manifests import iam_policies as pol
from instantstart.twin_process import TwinProcess
from tests.support.flows import hand_made_s3_claim, kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.mount_pods import writer_pod
from tests.support.servers import Running
from tests.support.twin import twin_client

TAG = "sc1"
DATA = pol.data_prefix(TAG)  # the cluster's data prefix: every claim on the project bucket lives below it


def wait_listing(cp: Running, args: dict[str, Any], count: int, timeout: float = 60.0) -> dict[str, Any]:
    """s3_storage_list_contents until it shows `count` objects (the twin uploads off its loop)."""
    deadline = time.monotonic() + timeout
    while True:
        page = mcp_calls(cp, [("s3_storage_list_contents", args)])[0]
        if page["count"] >= count or time.monotonic() > deadline:
            return page
        time.sleep(0.3)


def test_second_claim_with_prefix_listing_and_delete(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)
    core = kube(twin, tmp_path, TAG)
    s3: Any = twin_client(twin, "s3")

    defaults = mcp_calls(cp, [("s3_storage_get_defaults", {})])[0]
    bucket = defaults["bucketName"]
    assert defaults["prefix"] == DATA and defaults["accessModes"] == ["ReadWriteMany"]
    # Two claims: the default one on the cluster's data prefix, and a second one confined to a prefix below it.
    first = mcp_calls(cp, [("s3_storage_create", {})])[0]
    assert mcp_wait(cp, first["operationId"])["status"] == "SUCCEEDED"
    second = mcp_calls(cp, [("s3_storage_create", {"name": "team-a", "prefix": "teams/a/"})])[0]
    view = mcp_wait(cp, second["operationId"])
    assert view["status"] == "SUCCEEDED", view
    outputs = view["stages"][0]["outputs"]
    assert outputs["prefix"] == f"{DATA}teams/a/" and outputs["bucketName"] == bucket
    pv = core.read_persistent_volume("team-a-pv")
    assert f"prefix {DATA}teams/a/" in pv.spec.mount_options and pv.spec.access_modes == ["ReadWriteMany"]
    # A bad prefix is refused before anything is submitted, naming the field.
    bad = mcp_raw(cp, [("s3_storage_create", {"name": "bad", "prefix": "/abs"})])[0]
    assert bad["isError"] and "prefix" in bad["payload"]["error"]["message"]

    # A pod writes files under the mount: they appear as objects below the claim's prefix.
    files = {f"/data/out/f{i}.txt": "x" * (i + 1) for i in range(3)}
    core.create_namespaced_pod("default", writer_pod("writer", "team-a", {**files, "/tmp/local.txt": "not s3"}))
    page = wait_listing(cp, {"storage": "team-a", "prefix": "out/"}, 3)
    assert [o["path"] for o in page["objects"]] == ["out/f0.txt", "out/f1.txt", "out/f2.txt"]
    assert [o["size"] for o in page["objects"]] == [1, 2, 3] and page["truncated"] is False
    top = mcp_calls(cp, [("s3_storage_list_contents", {"storage": "team-a"})])[0]
    # Folders are relative to the claim like object paths; one passed back as prefix opens it.
    assert top["commonPrefixes"] == ["out/"] and top["objects"] == [] and top["prefix"] == f"{DATA}teams/a/"
    assert top["path"] == ""
    opened = mcp_calls(cp, [("s3_storage_list_contents", {"storage": "team-a", "prefix": top["commonPrefixes"][0]})])[0]
    assert opened["path"] == "out/" and [o["path"] for o in opened["objects"]] == [o["path"] for o in page["objects"]]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{DATA}teams/")["Contents"])
    assert keys == [f"{DATA}teams/a/out/f0.txt", f"{DATA}teams/a/out/f1.txt", f"{DATA}teams/a/out/f2.txt"]
    # Bounded pages with a continuation token.
    one = mcp_calls(cp, [("s3_storage_list_contents", {"storage": "team-a", "prefix": "out/", "maxKeys": 2})])[0]
    assert one["count"] == 2 and one["truncated"] and one["nextContinuationToken"]
    rest = mcp_calls(cp, [("s3_storage_list_contents", {"storage": "team-a", "prefix": "out/", "maxKeys": 2,
                                                         "continuationToken": one["nextContinuationToken"]})])[0]
    assert [o["path"] for o in rest["objects"]] == ["out/f2.txt"] and not rest["truncated"]
    assert rest["nextContinuationToken"] is None
    too_big = mcp_raw(cp, [("s3_storage_list_contents", {"storage": "team-a", "maxKeys": 5000})])[0]
    assert too_big["isError"] and "maxKeys" in json.dumps(too_big["payload"])

    # storage_list: both claims, with the pod that mounts team-a.
    listing = mcp_calls(cp, [("storage_list", {})])[0]
    claims = {c["name"]: c for c in listing["claims"]}
    assert set(claims) == {"s3-claim", "team-a"} and listing["count"] == 2
    assert claims["team-a"]["type"] == "s3" and claims["team-a"]["prefix"] == f"{DATA}teams/a/"
    assert claims["team-a"]["mountedBy"] == ["default/writer"] and claims["s3-claim"]["mountedBy"] == []
    assert claims["team-a"]["phase"] == "Bound"

    # Delete: refused while the pod mounts it (the pod named), allowed after; the objects stay.
    refused = mcp_raw(cp, [("storage_delete", {"name": "team-a"})])[0]
    assert refused["isError"] and refused["payload"]["error"]["code"] == "CONFLICT"
    assert "default/writer" in refused["payload"]["error"]["message"]
    assert core.read_namespaced_persistent_volume_claim("team-a", "default").status.phase == "Bound"
    core.delete_namespaced_pod("writer", "default", grace_period_seconds=0)
    deadline = time.monotonic() + 60
    while any(p.metadata.name == "writer" for p in core.list_namespaced_pod("default").items):
        assert time.monotonic() < deadline, "the pod never went"
        time.sleep(0.2)
    done = mcp_calls(cp, [("storage_delete", {"name": "team-a"})])[0]
    assert done == {"name": "team-a", "namespace": "default", "deletedClaim": True,
                    "deletedPersistentVolume": "team-a-pv", "bucketName": bucket, "narrowedRole": None,
                    "fileSystemId": None, "fileSystemDeletion": None}  # the project bucket: no grant to narrow
    names = [c["name"] for c in mcp_calls(cp, [("storage_list", {})])[0]["claims"]]
    assert names == ["s3-claim"]
    for read in (lambda: core.read_namespaced_persistent_volume_claim("team-a", "default"),
                 lambda: core.read_persistent_volume("team-a-pv")):
        try:
            read()
            raise AssertionError("still there")
        except k8s.ApiException as exc:
            assert exc.status == 404
    assert len(s3.list_objects_v2(Bucket=bucket, Prefix=f"{DATA}teams/a/")["Contents"]) == 3
    missing = mcp_raw(cp, [("storage_delete", {"name": "team-a"})])[0]
    assert missing["isError"] and missing["payload"]["error"]["code"] == "NOT_FOUND"

    # A claim someone else made by hand (no labels of ours) is refused, naming what was found; both objects stay.
    hand_made_s3_claim(core, "theirs", bucket, pv_labels={"app.kubernetes.io/managed-by": "Helm"})
    assert "theirs" in [c["name"] for c in mcp_calls(cp, [("storage_list", {})])[0]["claims"]]
    foreign = mcp_raw(cp, [("storage_delete", {"name": "theirs"})])[0]
    assert foreign["isError"] and foreign["payload"]["error"]["code"] == "PRECONDITION_FAILED", foreign
    message = foreign["payload"]["error"]["message"]
    assert "PersistentVolume theirs-pv has app.kubernetes.io/managed-by=Helm" in message, message
    assert "PersistentVolumeClaim default/theirs has no app.kubernetes.io/managed-by label" in message, message
    assert "kubectl delete pvc theirs -n default" in foreign["payload"]["error"]["hint"]
    assert core.read_persistent_volume("theirs-pv").metadata.name == "theirs-pv"
    assert core.read_namespaced_persistent_volume_claim("theirs", "default").metadata.name == "theirs"
