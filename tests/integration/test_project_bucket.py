"""A fresh account has no project bucket: the first cluster's EKS stage creates it, tagged, in its Region."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from botocore.exceptions import ClientError

from instantstart.aws import s3 as bucket_ops
from instantstart.aws.clients import AwsClients
from instantstart.errors import InstantStartError
from instantstart.settings import Settings
from instantstart.twin_process import TwinProcess
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal


def test_the_first_cluster_creates_the_project_bucket(cp: Running, twin: TwinProcess) -> None:
    s3 = twin_client(twin, "s3")
    stem = f"instantstart-{twin.info['account_id']}-{twin.env['AWS_REGION']}"
    before = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    with cp.client() as client:
        ref = client.post("/api/v1/clusters/eks", json={"clusterTag": "fresh"})
        assert ref.status_code == 202, ref.text
        view = wait_terminal(client, ref.json()["operationId"], timeout=120)
    assert view["status"] == "SUCCEEDED", view
    # A new bucket with a random suffix (a predictable name could be squatted), never the twin's untagged one.
    [bucket] = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"] not in before]
    assert bucket.startswith(stem + "-") and len(bucket) == len(stem) + 9
    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == twin.env["AWS_REGION"]
    tags = {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=bucket)["TagSet"]}
    assert tags["instantstart:cluster-tag"] == "fresh" and tags["instantstart:installation"].startswith("is-")


def test_clusters_created_at_once_share_the_bucket_one_of_them_made(cp: Running, twin: TwinProcess) -> None:
    """Three EKS stages submitted together: each finds the bucket absent, one creates it, the others get S3's
    BucketAlreadyOwnedByYou (outside us-east-1) and go on with it; the bucket is tagged once, by its creator."""
    s3 = twin_client(twin, "s3")
    before = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    with cp.client() as client:
        refs = [client.post("/api/v1/clusters/eks", json={"clusterTag": tag}) for tag in ("once1", "once2", "once3")]
        assert all(r.status_code == 202 for r in refs), [r.text for r in refs]
        views = [wait_terminal(client, r.json()["operationId"], timeout=180) for r in refs]
    assert [v["status"] for v in views] == ["SUCCEEDED"] * 3, views
    [bucket] = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"] not in before]
    tags = {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=bucket)["TagSet"]}
    assert tags["instantstart:cluster-tag"] in ("once1", "once2", "once3")


def test_a_bucket_this_account_already_made_is_not_an_error(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    region, account = twin.env["AWS_REGION"], str(twin.info["account_id"])
    s3 = twin_client(twin, "s3")
    s3.create_bucket(Bucket="made-meanwhile", CreateBucketConfiguration={"LocationConstraint": region})
    aws = AwsClients(Settings(data_dir=tmp_path, aws_endpoint_url=twin.endpoint_url, aws_region=region))
    tags = [{"Key": "instantstart:cluster-tag", "Value": "late"}]
    bucket_ops.create_bucket(aws, region, "made-meanwhile", tags, account)  # BucketAlreadyOwnedByYou: no error
    with pytest.raises(ClientError) as untagged:  # its creator tags it; this call changed nothing
        s3.get_bucket_tagging(Bucket="made-meanwhile")
    assert untagged.value.response["Error"]["Code"] == "NoSuchTagSet"
    # Another account's bucket of that name (BucketAlreadyExists) is still an error.
    made = httpx.post(f"{twin.endpoint_url}/_twin/s3/foreign-buckets",
                      json={"bucket": "someone-elses", "account": "999988887777"}, timeout=30)
    made.raise_for_status()
    with pytest.raises(InstantStartError) as foreign:
        bucket_ops.create_bucket(aws, region, "someone-elses", tags, account)
    assert "create bucket someone-elses" in foreign.value.message, foreign.value.message
