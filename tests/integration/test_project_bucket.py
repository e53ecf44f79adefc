"""A fresh account has no project bucket: the first cluster's EKS stage creates it, tagged, in its Region."""

from __future__ import annotations

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
