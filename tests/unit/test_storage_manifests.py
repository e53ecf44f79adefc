"""The Mountpoint for S3 CSI volume and claim builders, name rules, and the adopt-or-refuse comparisons."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from instantstart.errors import InvalidInput
from instantstart.manifests import storage as storage_manifests
from instantstart.settings import Settings


def test_pv_is_a_static_mountpoint_volume_reserved_for_its_claim() -> None:
    pv = storage_manifests.build_pv(cluster_tag="demo", claim="s3-claim", bucket="my-bucket", region="us-west-2")
    assert pv["kind"] == "PersistentVolume" and pv["metadata"]["name"] == "s3-claim-pv"
    spec = pv["spec"]
    assert spec["csi"] == {
        "driver": "s3.csi.aws.com",
        "volumeHandle": "instantstart-demo-s3-claim",
        "volumeAttributes": {"bucketName": "my-bucket"},
    }
    assert spec["accessModes"] == ["ReadWriteMany"] and spec["storageClassName"] == ""
    assert spec["claimRef"] == {"namespace": "default", "name": "s3-claim"}
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["mountOptions"] == ["allow-delete", "allow-other", "region us-west-2"]
    assert pv["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "instantstart"
    assert pv["metadata"]["labels"]["instantstart.io/cluster-tag"] == "demo"


def test_prefix_becomes_a_mount_option_with_one_trailing_slash() -> None:
    pv = storage_manifests.build_pv(cluster_tag="t", claim="c", bucket="b-1", region="eu-west-1", prefix="datasets/run")
    assert pv["spec"]["mountOptions"][-1] == "prefix datasets/run/"
    assert storage_manifests.pv_source(pv) == {"driver": "s3.csi.aws.com", "bucket": "b-1", "region": "eu-west-1",
                               "prefix": "datasets/run/", "claim": "default/c"}


def test_pvc_binds_by_volume_name_with_the_empty_class() -> None:
    pvc = storage_manifests.build_pvc(cluster_tag="demo", claim="s3-claim")
    assert pvc["metadata"] == {"name": "s3-claim", "namespace": "default", "labels": pvc["metadata"]["labels"]}
    spec = pvc["spec"]
    assert spec["volumeName"] == "s3-claim-pv" and spec["storageClassName"] == ""
    assert spec["accessModes"] == ["ReadWriteMany"]
    # The claim asks for no more than the volume offers, or the binder would refuse the pair.
    pv = storage_manifests.build_pv(cluster_tag="demo", claim="s3-claim", bucket="bucket-a", region="us-west-2")
    assert spec["resources"]["requests"]["storage"] == pv["spec"]["capacity"]["storage"]


def test_an_identical_volume_is_adopted_and_a_different_one_refused() -> None:
    desired = storage_manifests.build_pv(cluster_tag="t", claim="c", bucket="bucket-a", region="us-west-2")
    bound = {**desired, "spec": {**desired["spec"], "claimRef": {"namespace": "default", "name": "c", "uid": "u1"}}}
    assert storage_manifests.pv_differences(bound, desired) == []
    other = storage_manifests.build_pv(cluster_tag="t", claim="c", bucket="bucket-b", region="us-west-2")
    assert storage_manifests.pv_differences(other, desired) == ["bucket is 'bucket-b', wanted 'bucket-a'"]
    moved = storage_manifests.build_pv(cluster_tag="t", claim="c", bucket="bucket-a", region="us-east-1")
    assert storage_manifests.pv_differences(moved, desired) == ["region is 'us-east-1', wanted 'us-west-2'"]
    taken = {**desired, "spec": {**desired["spec"], "claimRef": {"namespace": "team", "name": "x"}}}
    assert storage_manifests.pv_differences(taken, desired) == ["it is reserved for team/x, not default/c"]


def test_a_claim_on_another_volume_or_class_is_refused() -> None:
    desired = storage_manifests.build_pvc(cluster_tag="t", claim="c")
    assert storage_manifests.pvc_differences(desired, desired) == []
    assert storage_manifests.pvc_differences({"spec": {"storageClassName": "", "volumeName": ""}}, desired) == []
    elsewhere = {"spec": {"storageClassName": "", "volumeName": "pvc-123"}}
    assert storage_manifests.pvc_differences(elsewhere, desired) == ["it is bound to volume 'pvc-123', not 'c-pv'"]
    dynamic = {"spec": {"storageClassName": "gp3"}}
    assert "storage class 'gp3'" in storage_manifests.pvc_differences(dynamic, desired)[0]


@pytest.mark.parametrize("name", ["my-bucket", "a.b.c", "abc", "instantstart-111122223333-us-west-2", "x" * 63])
def test_valid_bucket_names(name: str) -> None:
    assert storage_manifests.validate_bucket_name(name) == name


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("ab", "3-63"),
        ("x" * 64, "3-63"),
        ("My-Bucket", "lowercase"),
        ("bucket_1", "lowercase"),
        ("-bucket", "starting"),
        ("a..b", "'..'"),
        ("a.-b", "'.-'"),
        ("192.168.5.4", "IP address"),
        ("xn--bucket", "reserves"),
        ("bucket-s3alias", "reserves"),
    ],
)
def test_invalid_bucket_names_name_the_field(name: str, text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        storage_manifests.validate_bucket_name(name)
    assert info.value.message.startswith("Invalid input: bucketName: ") and text in info.value.message
    assert info.value.details == {"fields": [{"field": "bucketName", "message": info.value.message.split(": ", 2)[2]}]}


@pytest.mark.parametrize("name", ["Bad", "a_b", "-a", "a" * 61, ""])
def test_claim_names_are_dns_labels_short_enough_for_the_volume_name(name: str) -> None:
    with pytest.raises(InvalidInput) as info:
        storage_manifests.validate_claim_name(name)
    assert "Invalid input: name:" in info.value.message


@pytest.mark.parametrize("prefix", ["/abs", "a//b", "a/../b", "with space", "x" * 513])
def test_unsafe_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(InvalidInput):
        storage_manifests.validate_prefix(prefix)
    assert storage_manifests.validate_prefix("data/run-1/") == "data/run-1/"


@pytest.mark.parametrize("image", ["python", "python:3.12 slim", "repo/img@sha256:abc"])
def test_the_download_image_setting_must_be_pinned(image: str) -> None:
    with pytest.raises(ValidationError):
        Settings(model_download_image=image)
    assert Settings(model_download_image="ghcr.io/acme/hf-download:1.2.0").model_download_image.endswith(":1.2.0")
