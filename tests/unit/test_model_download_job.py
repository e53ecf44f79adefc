"""The model download Job mounts only its model's own directory of the node's NVMe, and its token Secret is
labelled for cleanup."""

from __future__ import annotations

import pytest

from instantstart.manifests import model_download as md


def _job(model_id: str = "Qwen/Qwen3-0.6B", revision: str = "main") -> dict[str, object]:
    return md.build_job(
        name=md.job_name(model_id, revision), namespace="default", model_id=model_id, revision=revision,
        claim="s3-claim", cpu="4", memory_gi="16", token_secret_name="t", gpu_instance_types=[], image="img",
    )


def test_the_job_mounts_only_its_model_directory_of_the_nvme() -> None:
    spec = _job()["spec"]["template"]["spec"]  # type: ignore[index]
    host_paths = [v["hostPath"] for v in spec["volumes"] if "hostPath" in v]
    assert host_paths == [{"path": "/opt/dlami/nvme/instantstart/Qwen--Qwen3-0.6B/main", "type": "DirectoryOrCreate"}]
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["nvme"] == {"name": "nvme", "mountPath": "/host-nvme"}  # no subPath climbing out of it
    # The program stages straight into that directory (not below a path of its own choosing).
    assert 'stage = nvme if fast else' in md.SCRIPT
    other = _job("org/other", "v2")["spec"]["template"]["spec"]["volumes"]  # type: ignore[index]
    assert [v["hostPath"]["path"] for v in other if "hostPath" in v] == ["/opt/dlami/nvme/instantstart/org--other/v2"]


@pytest.mark.parametrize(("model_id", "revision"), [("../etc", "main"), ("a/..", "main"), ("a/b", ".."),
                                                     ("a/b/c", "main"), ("a", "")])
def test_the_staging_directory_never_leaves_its_root(model_id: str, revision: str) -> None:
    with pytest.raises(ValueError):
        md.staging_dir(model_id, revision)


def test_the_token_secret_is_labelled_and_carries_its_orphan_time() -> None:
    body = md.token_secret("n", "default", "dG9r", "2026-01-01T00:00:00+00:00")
    assert body["metadata"]["labels"][md.LABEL_TOKEN] == "true"
    assert body["metadata"]["annotations"] == {md.ANNOTATION_EXPIRES: "2026-01-01T00:00:00+00:00"}
