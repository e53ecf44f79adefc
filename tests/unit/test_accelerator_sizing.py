"""Training pods sized from the instance-type catalog, field by field against what AWS's HyperPod template renders."""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest

from instantstart.errors import InvalidInput
from instantstart.manifests import training as training_manifests
from instantstart.services.core import sizing
from instantstart.services.core.instance_types import catalog
from instantstart.services.training import checks
from instantstart.services.training.submit import JobShape

# The reference: the `hyp` CLI's template (pinned in the dev extra) and the sagemaker-hyperpod SDK it imports, which
# sizes the pod in HyperPodPytorchJob.create (installed --no-deps: its own pins of pytest/ruff/click conflict ours).
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    # Both are installed by `make setup` (the Makefile adds the SDK --no-deps): a missing one fails, never skips.
    import hyperpod_pytorch_job_template.v1_1.model as template
    import sagemaker.hyperpod.training.hyperpod_pytorch_job as sdk

_UNITS = {"": 1.0, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def qty(value: Any) -> float:
    """A Kubernetes quantity as a number (cpu in cores, memory in bytes)."""
    number, unit = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(value)).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def official(instance_type: str, replicas: int, accelerators: int | None = None) -> dict[str, Any]:
    """The HyperPodPyTorchJob `hyp create hyp-pytorch-job` submits: the template's to_domain, then the SDK's quota
    allocation exactly as HyperPodPytorchJob.create runs it before calling the API."""
    config = template.PyTorchJobConfig(job_name="j", image="i", instance_type=instance_type, replica_count=replicas,
                                       accelerators=accelerators, max_retry=5)
    job = config.to_domain()
    spec = sdk._HyperPodPytorchJob(**job.model_dump(by_alias=True, exclude_none=True))
    spec = sdk.HyperPodPytorchJob.allocate_quotas_if_applicable(spec)
    out: dict[str, Any] = spec.model_dump(exclude_none=True)
    return out


def ours(instance_type: str, nodes: int, gpus: int | None = None, **shape: Any) -> dict[str, Any]:
    """What training_job_submit renders for the same intent."""
    req = JobShape(job_name="j", instance_type=instance_type, nodes=nodes, gpus_per_node=gpus, **shape)
    spec = training_manifests.JobSpec(
        name="j",
        namespace="default",
        image="i",
        entry=["train.py"],
        nodes=nodes,
        nproc_per_node="auto",
        resources=checks.pod_resources(req),
        instance_type=instance_type,
    )
    return training_manifests.job(spec)


def _container(job: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = job["replicaSpecs" if "replicaSpecs" in job else "spec"]
    specs = c if isinstance(c, list) else c["replicaSpecs"]
    return dict(specs[0]["template"]["spec"]["containers"][0])


def _numbers(section: dict[str, Any]) -> dict[str, float]:
    return {k: qty(v) for k, v in section.items()}


def compare(theirs: dict[str, Any], mine: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """Asserts the fields that must agree; returns our requests and limits as numbers."""
    t, o = _container(theirs), _container(mine)
    assert o["name"] == t["name"] == training_manifests.CONTAINER
    t_specs, o_specs = theirs["replicaSpecs"][0], mine["spec"]["replicaSpecs"][0]
    assert o_specs["replicas"] == t_specs["replicas"]
    assert o_specs["template"]["spec"]["nodeSelector"] == t_specs["template"]["spec"]["nodeSelector"]
    assert mine["spec"]["runPolicy"]["cleanPodPolicy"] == theirs["runPolicy"]["cleanPodPolicy"] == "None"
    req, lim = _numbers(o["resources"]["requests"]), _numbers(o["resources"]["limits"])
    t_req, t_lim = _numbers(t["resources"]["requests"]), _numbers(t["resources"]["limits"])
    assert set(req) == set(t_req) and set(lim) == set(t_lim)
    for key, value in t_req.items():
        assert req[key] == pytest.approx(value, abs=2**20 if key == "memory" else 1e-3), key
    for key, value in t_lim.items():
        assert lim[key] == pytest.approx(value, abs=2**20 if key == "memory" else 1e-3), key
    return req, lim


def test_p5_48xlarge_two_nodes_requests_every_gpu_and_efa_interface_like_the_template() -> None:
    mine = ours("ml.p5.48xlarge", 2)
    req, lim = compare(official("ml.p5.48xlarge", 2), mine)
    assert req == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32, "cpu": 179, "memory": 1890 * 2**30}
    assert "cpu" not in lim and lim["memory"] == req["memory"]
    env = {e["name"]: e["value"] for e in _container(mine)["env"]}
    # Beyond the template (which sets no env): without FI_PROVIDER=efa NCCL falls back to TCP sockets.
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"


def test_trn1_32xlarge_requests_neuron_devices_and_never_a_gpu() -> None:
    mine = ours("ml.trn1.32xlarge", 2)
    req, _ = compare(official("ml.trn1.32xlarge", 2), mine)
    assert req["aws.amazon.com/neurondevice"] == 16 and req["vpc.amazonaws.com/efa"] == 8
    assert "nvidia.com/gpu" not in _container(mine)["resources"]["requests"]
    assert "nvidia.com/gpu" not in _container(mine)["resources"]["limits"]


def test_g5_xlarge_single_node_has_no_efa_and_agrees_with_the_template() -> None:
    mine = ours("ml.g5.xlarge", 1)
    req, _ = compare(official("ml.g5.xlarge", 1), mine)
    assert req == {"nvidia.com/gpu": 1, "cpu": 3, "memory": 11 * 2**30}
    assert not any(e["name"].startswith("FI_") for e in _container(mine)["env"])


def test_where_we_differ_from_the_template_on_purpose() -> None:
    # One node: collectives never leave it, so no EFA (the template takes all 32, blocking a neighbour's job).
    single = _container(ours("ml.p5.48xlarge", 1))["resources"]["requests"]
    assert "vpc.amazonaws.com/efa" not in single
    assert official("ml.p5.48xlarge", 1)["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"][
        "requests"]["vpc.amazonaws.com/efa"] == 32
    # Half a node of a multi-node job: half the interfaces, so two such pods share a node (the template asks all 32
    # for each, and the second pod can never schedule); cpu and memory are the same share in both.
    half = ours("ml.p5.48xlarge", 2, gpus=4)
    theirs = official("ml.p5.48xlarge", 2, accelerators=4)
    t_req = _numbers(_container(theirs)["resources"]["requests"])
    o_req = _numbers(_container(half)["resources"]["requests"])
    assert t_req["vpc.amazonaws.com/efa"] == 32 and o_req["vpc.amazonaws.com/efa"] == 16
    assert o_req["cpu"] == t_req["cpu"] == 96 and o_req["memory"] == t_req["memory"] == 1024 * 2**30
    # EFA off explicitly: no interfaces and no libfabric env, never by accident.
    off = _container(ours("ml.p5.48xlarge", 2, efa=False))
    assert "vpc.amazonaws.com/efa" not in off["resources"]["requests"]
    assert not any(e["name"] == "FI_PROVIDER" for e in off["env"])


def test_requests_that_cannot_fit_a_node_are_refused_naming_the_numbers() -> None:
    with pytest.raises(InvalidInput, match=r"gpusPerNode: 9 GPUs per node, but ml.p5.48xlarge has 8"):
        ours("ml.p5.48xlarge", 1, gpus=9)
    with pytest.raises(InvalidInput, match=r"gpusPerNode: 17 Neuron devices per node, but ml.trn1.32xlarge has 16"):
        ours("ml.trn1.32xlarge", 1, gpus=17)
    with pytest.raises(InvalidInput, match=r"vcpu: 190 vCPUs per pod, but a ml.p5.48xlarge node gives pods at most "
                       r"179 of its 192"):
        ours("ml.p5.48xlarge", 1, vcpu=190)
    with pytest.raises(InvalidInput, match=r"memoryGiB: 16 GiB per pod, but a ml.g5.xlarge node gives pods at most "
                       r"11 of its 16 GiB"):
        ours("ml.g5.xlarge", 1, memoryGiB=16)
    with pytest.raises(InvalidInput, match=r"efa: ml.g5.xlarge has no EFA interfaces"):
        ours("ml.g5.xlarge", 2, efa=True)


@pytest.mark.parametrize("name", sorted(catalog()))
def test_every_type_sizes_a_whole_node_pod_like_the_template(name: str) -> None:
    t = catalog()[name]
    facts = sdk.INSTANCE_RESOURCES.get(name)
    if facts is None:
        pytest.skip(f"{name} is not in the SDK's table")
    assert (t.gpus, t.neuron, t.efa, t.vcpus, t.memory_gib) == (
        facts["gpu"], facts["trainium"], facts["efa"], facts["cpu"], facts["memory"])
    res = sizing.pod_resources(t, accelerators_per_pod=t.accelerators, nodes=2)
    theirs = _numbers(_container(official(name, 2))["resources"]["requests"])
    assert res.cpu_milli / 1000 == pytest.approx(theirs["cpu"], abs=1e-3)
    assert res.memory_mib * 2**20 == pytest.approx(theirs["memory"], abs=2**20)


def test_model_servers_and_endpoints_are_sized_from_the_same_table() -> None:
    from instantstart.manifests import inference as mi
    from instantstart.services.inference.managed import ManagedRequest, lint_request
    from instantstart.services.inference.placement import server_resources

    # A replica that may land on either type gets what the smaller share gives: 1 of 4 GPUs of a g6.12xlarge
    # (12 cores, 48 GiB) rather than all of a g6.4xlarge (14 cores, 51 GiB); one node, so no EFA.
    sized = server_resources(["ml.g6.4xlarge", "ml.g6.12xlarge"], 1)
    assert (sized.gpus, sized.efa, sized.cpu_milli, sized.memory_mib) == (1, 0, 12000, 48 * 1024)
    spec = mi.ServerSpec(name="s", namespace="default", engine="vllm", command=["vllm", "serve", "m"], image="i",
                         gpu_count=1, replicas=1, instance_types=["ml.g6.4xlarge", "ml.g6.12xlarge"], port=8000,
                         service_type="ClusterIP", model="m", token_secret=None, s3_claim=None,
                         cpu_milli=sized.cpu_milli, memory_mib=sized.memory_mib)
    container = mi.deployment(spec)["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"nvidia.com/gpu": "1", "cpu": "12", "memory": "49152Mi"},
                                      "limits": {"nvidia.com/gpu": "1", "memory": "49152Mi"}}
    body = {"name": "q", "modelName": "q", "image": "vllm/vllm-openai:v0.11.0", "instanceType": "ml.g6.12xlarge",
            "gpuCount": 2, "modelSource": {"type": "huggingface", "huggingFaceModelId": "Qwen/Qwen3-0.6B"}}
    worker = lint_request(ManagedRequest.model_validate(body)).manifest["spec"]["worker"]
    assert worker["resources"]["requests"] == {"nvidia.com/gpu": "2", "cpu": "24", "memory": f"{96 * 1024}Mi"}
    mine = lint_request(ManagedRequest.model_validate({**body, "cpu": "8", "memory": "32Gi"})).manifest
    assert mine["spec"]["worker"]["resources"]["requests"] == {"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi"}


def test_the_kuberay_recipe_path_refuses_pod_sizes_it_cannot_honour() -> None:
    import asyncio

    from instantstart.services.training import recipes as rc

    for extra, field in (({"vcpu": 8}, "vcpu"), ({"memoryGiB": 32}, "memoryGiB")):
        req = rc.RecipeRequest(recipe="verl", job_name="rl", instance_type="ml.g6.4xlarge", **extra)
        with pytest.raises(InvalidInput, match=rf"{field}: is not supported on the KubeRay path"):
            asyncio.run(rc._submit_on_kuberay(None, rc.recipes()["verl"], req))  # type: ignore[arg-type]
