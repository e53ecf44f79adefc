"""Training env: plain values and references to a key of a Kubernetes Secret, validated on the wire and rendered
as valueFrom.secretKeyRef in HyperPodPyTorchJobs and RayJobs (head and workers)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from instantstart.manifests import ray_job as ray_job_manifests
from instantstart.manifests import training as training_manifests
from instantstart.manifests.env import SecretKeyRef, env_entries
from instantstart.manifests.resources import PodResources
from instantstart.services.training.env import spec_env
from instantstart.services.training.ray_jobs import RayJobRequest
from instantstart.services.training.submit import JobRequest

JOB = {"jobName": "demo", "image": "example/train:1", "command": "train.py", "instanceType": "ml.g6.4xlarge"}
REF = {"secretKeyRef": {"name": "wandb.creds", "key": "api_key.v1"}}
RENDERED = {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb.creds", "key": "api_key.v1"}}}


def _containers(body: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.extend(c for c in node.get("containers") or [] if isinstance(c, dict))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return found


def test_env_entries_render_plain_values_and_secret_refs_in_order() -> None:
    env = {"SEED": "7", "WANDB_API_KEY": SecretKeyRef("wandb.creds", "api_key.v1")}
    assert env_entries(env) == [{"name": "SEED", "value": "7"}, RENDERED]


def test_a_pytorch_job_carries_the_ref_never_a_value() -> None:
    req = JobRequest.model_validate({**JOB, "env": {"SEED": "7", "WANDB_API_KEY": REF}})
    spec = training_manifests.JobSpec(name="demo", namespace="default", image=req.image, entry=["train.py"], nodes=1,
                     nproc_per_node="auto", resources=PodResources(gpus=1), instance_type=req.instance_type,
                     env=spec_env(req.env))
    [container] = _containers(training_manifests.job(spec))
    assert RENDERED in container["env"] and {"name": "SEED", "value": "7"} in container["env"]
    assert all("value" not in e for e in container["env"] if e["name"] == "WANDB_API_KEY")


def test_a_ray_job_carries_the_ref_in_head_and_workers() -> None:
    req = RayJobRequest.model_validate({"jobName": "rl", "image": "example/ray:1", "entrypoint": "python3 a.py",
                                        "instanceType": "ml.g6.4xlarge", "env": {"WANDB_API_KEY": REF}})
    spec = ray_job_manifests.RayJobSpec(
        name="rl",
        namespace="default",
        image=req.image,
        entrypoint=["python3", "a.py"],
        workers=1,
        worker=PodResources(gpus=1),
        instance_type=req.instance_type,
        env=spec_env(req.env),
    )
    containers = _containers(ray_job_manifests.ray_job(spec))
    assert len(containers) >= 2 and all(RENDERED in c["env"] for c in containers)


@pytest.mark.parametrize(("ref", "field"), [
    ({"secretKeyRef": {"name": "Bad_Name", "key": "k"}}, "name"),
    ({"secretKeyRef": {"name": "ok", "key": "a/b"}}, "key"),
    ({"secretKeyRef": {"name": "ok"}}, "key"),
    ({"secretKeyRef": {"name": "ok", "key": "k"}, "value": "x"}, "value"),
    ({"configMapKeyRef": {"name": "ok", "key": "k"}}, "configMapKeyRef"),
])
def test_bad_refs_are_refused_naming_the_field(ref: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        JobRequest.model_validate({**JOB, "env": {"TOKEN": ref}})
    assert any(field in ".".join(str(p) for p in e["loc"]) for e in refused.value.errors()), refused.value
