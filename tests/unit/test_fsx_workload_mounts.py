"""FSx claims in workload builders: the PVC volume at /fsx (read-write for jobs and Ray, read-only for model servers),
absent when no claim is named; recipe paths under /s3 or /fsx; an FSx download's outcome read from its log."""

from __future__ import annotations

import pytest

from instantstart.errors import InvalidInput
from instantstart.manifests import inference as mi
from instantstart.manifests import ray_job as ray_job_manifests
from instantstart.manifests import training as training_manifests
from instantstart.manifests.resources import PodResources
from instantstart.services.base.fsx_claims import require_fsx_claim, uses_fsx
from instantstart.services.storage.model_fsx import fsx_outcome
from instantstart.services.training import checks
from instantstart.services.training.recipes import needs_s3, recipes


def _job(**extra: object) -> dict[str, object]:
    return training_manifests.job(training_manifests.JobSpec(name="j", namespace="default", image="i",
                           entry=["train.py"], nodes=1, nproc_per_node="auto", resources=PodResources(gpus=1),
                           instance_type="ml.g6.4xlarge", s3_claim="s3-claim", **extra))  # type: ignore[arg-type]


def test_a_training_job_mounts_the_fsx_claim_read_write_at_fsx() -> None:
    pod = _job(fsx_claim="shared")["spec"]["replicaSpecs"][0]["template"]["spec"]  # type: ignore[index]
    assert {"name": "fsx", "persistentVolumeClaim": {"claimName": "shared"}} in pod["volumes"]
    assert {"name": "fsx", "mountPath": "/fsx"} in pod["containers"][0]["volumeMounts"]
    plain = _job()["spec"]["replicaSpecs"][0]["template"]["spec"]  # type: ignore[index]
    assert [v["name"] for v in plain["volumes"]] == ["shm", "s3"]


def test_ray_head_and_workers_mount_the_fsx_claim() -> None:
    body = ray_job_manifests.ray_job(ray_job_manifests.RayJobSpec(name="rl", namespace="default", image="i",
                                  entrypoint=["python3", "a.py"], workers=1, worker=PodResources(gpus=1),
                                  instance_type="ml.g6.4xlarge", fsx_claim="shared"))
    cluster = body["spec"]["rayClusterSpec"]
    for template in (cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][0]["template"]):
        assert {"name": "fsx", "persistentVolumeClaim": {"claimName": "shared"}} in template["spec"]["volumes"]
        assert {"name": "fsx", "mountPath": "/fsx"} in template["spec"]["containers"][0]["volumeMounts"]


def test_a_model_server_mounts_the_fsx_claim_read_only() -> None:
    spec = mi.ServerSpec.model_validate(dict(
        name="tiny", namespace="default", engine="vllm", command=["vllm", "serve", "/fsx/models/a/main"], image="i",
        gpu_count=1, replicas=1, instance_types=["ml.g6.4xlarge"], port=8000, service_type="clusterip", model="m",
        token_secret=None, s3_claim=None, fsx_claim="shared"))
    pod = mi.deployment(spec)["spec"]["template"]["spec"]
    assert {"name": "fsx", "persistentVolumeClaim": {"claimName": "shared", "readOnly": True}} in pod["volumes"]
    assert {"name": "fsx", "mountPath": "/fsx", "readOnly": True} in pod["containers"][0]["volumeMounts"]


def test_commands_that_use_fsx_need_the_claim() -> None:
    assert uses_fsx(["train.py", "--data", "/fsx/d"]) and uses_fsx(["a.py", "data.path=/fsx/x"])
    assert not uses_fsx(["train.py", "--data", "/fsxdata", "/s3/x"])
    require_fsx_claim(["train.py", "/fsx/d"], "shared")
    with pytest.raises(InvalidInput, match="entrypoint: uses /fsx, but fsxClaim is not set"):
        require_fsx_claim(["a.py", "/fsx/d"], None, "entrypoint")


def test_recipe_paths_lie_under_s3_or_fsx() -> None:
    checks.check_under_mount("fields.script", "/fsx/code/train.py")
    checks.check_under_mount("fields.script", "/s3/code/train.py")
    for bad in ("/fsx/../etc/passwd", "/fsxx/a", "/tmp/a"):
        with pytest.raises(InvalidInput, match="is not under /s3 or /fsx"):
            checks.check_under_mount("fields.script", bad)
    pytorch = recipes()["pytorch"]
    assert needs_s3(pytorch, {"script": "/s3/a.py", "outputDir": "/fsx/out", "epochs": 1, "args": ""})
    assert not needs_s3(pytorch, {"script": "/fsx/a.py", "outputDir": "/fsx/out", "epochs": 1, "args": ""})


def test_an_fsx_download_outcome_comes_from_its_log() -> None:
    progress = {"files": 4, "filesTotal": 4, "bytes": 900, "bytesTotal": 900}
    lines = ["staging on instance NVMe /host-nvme/x", f"progress {progress}", "done 4 files"]
    assert fsx_outcome(lines, progress) == {"alreadyPresent": False, "files": 4, "totalBytes": 900}
    assert fsx_outcome(["staging on emptyDir", "already present"], None)["alreadyPresent"] is True  # type: ignore[index]
    assert fsx_outcome(["staging on emptyDir", "error: boom"], None) is None


def test_only_plain_words_are_read_for_fsx_paths() -> None:
    """An env entry that is a secretKeyRef names no path (it used to raise AttributeError: a 500)."""
    from instantstart.services.base.fsx_claims import uses_fsx
    from instantstart.services.training.env import EnvSource

    ref = EnvSource.model_validate({"secretKeyRef": {"name": "s", "key": "k"}})
    assert uses_fsx(["/fsx/data", ref]) and uses_fsx(["python", "--data=/fsx/x"])
    assert not uses_fsx([ref, "train.py"])
