"""Recipes as data: LLaMA-Factory and MS-Swift render field by field into a HyperPodPyTorchJob; bad fields refused."""

from __future__ import annotations

from typing import Any

import pytest

from instantstart.errors import InvalidInput
from instantstart.manifests import training as training_manifests
from instantstart.manifests.resources import PodResources
from instantstart.services.training import checks
from instantstart.services.training.inputs import object_key
from instantstart.services.training.recipes import Recipe, config_files, needs_s3, recipes, render, uses_s3
from instantstart.services.training.submit import entry_words


def _job(recipe: str, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    r = recipes()[recipe]
    words, env, _ = render(r, fields)
    spec = training_manifests.JobSpec(
        name="ft",
        namespace="team-a",
        image=r.image,
        entry=words,
        nodes=2,
        nproc_per_node="auto",
        resources=PodResources(gpus=1),
        instance_type="ml.g6.4xlarge",
        env=env,
        s3_claim="s3-claim",
        recipe=r.name,
        **extra,
    )
    return training_manifests.job(spec)


def _flags(command: list[str]) -> dict[str, str]:
    return {command[i][2:]: command[i + 1] for i in range(len(command) - 1) if command[i].startswith("--")
            and not command[i + 1].startswith("--") and "=" not in command[i]}


def test_the_recipe_files_load_with_their_defaults() -> None:
    assert set(recipes()) == {"pytorch", "llama-factory", "ms-swift", "verl"}
    assert {n: r.path for n, r in recipes().items()} == {"pytorch": "hyperpod", "llama-factory": "hyperpod",
                                                        "ms-swift": "hyperpod", "verl": "kuberay"}
    assert all(uses_s3(r) for r in recipes().values())


def test_llama_factory_renders_field_by_field() -> None:
    body = _job("llama-factory", {"model": "/s3/models/qwen", "dataset": "my_sft", "datasetDir": "/s3/data/sft",
                                  "finetuningType": "full", "epochs": 2, "learningRate": 2e-5, "batchSize": 4})
    assert body["apiVersion"] == "sagemaker.amazonaws.com/v1" and body["kind"] == "HyperPodPyTorchJob"
    assert body["metadata"]["labels"][training_manifests.LABEL_RECIPE] == "llama-factory"
    spec = body["spec"]
    assert spec["nprocPerNode"] == "auto"
    assert spec["runPolicy"] == {"jobMaxRetryCount": 5, "cleanPodPolicy": "None", "restartPolicy": {
        "numRestartBeforeFullJobRestart": 3, "evalPeriodSeconds": 21600, "maxFullJobRestarts": 1}}
    [replica] = spec["replicaSpecs"]
    assert replica["name"] == "pod" and replica["replicas"] == 2
    pod = replica["template"]["spec"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.g6.4xlarge"}
    [c] = pod["containers"]
    assert c["name"] == "pytorch-job-container" and c["image"] == "hiyouga/llamafactory:0.9.3"
    assert c["command"][:5] == ["hyperpodrun", "--nnodes=2", "--nproc-per-node=auto", "-m", "llamafactory.launcher"]
    assert "torchrun" not in c["command"]
    flags = _flags(c["command"])
    assert flags == {
        "stage": "sft", "do_train": "true", "model_name_or_path": "/s3/models/qwen", "dataset": "my_sft",
        "dataset_dir": "/s3/data/sft", "template": "qwen", "finetuning_type": "full",
        "output_dir": "/s3/output/llama-factory", "cutoff_len": "2048", "per_device_train_batch_size": "4",
        "gradient_accumulation_steps": "8", "learning_rate": "2e-05", "num_train_epochs": "2.0", "bf16": "true",
        "logging_steps": "10", "save_steps": "500",
    }
    assert {e["name"]: e["value"] for e in c["env"]} == {"NNODES": "2", "NPROC_PER_NODE": "auto",
                                                         "HF_HOME": "/s3/hf-cache"}
    assert c["resources"] == {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    assert c["ports"] == [{"containerPort": 8080}]
    assert {"name": "s3", "mountPath": "/s3"} in c["volumeMounts"]
    assert {"name": "s3", "persistentVolumeClaim": {"claimName": "s3-claim"}} in pod["volumes"]


def test_ms_swift_renders_field_by_field_with_a_budget_override() -> None:
    budget = training_manifests.RunPolicy(
        job_max_retry_count=9,
        num_restart_before_full_job_restart=0,
        eval_period_seconds=600,
        max_full_job_restarts=4,
        clean_pod_policy="None",
    )
    body = _job("ms-swift", {"dataset": "/s3/data/chat.jsonl", "trainType": "full", "loraRank": 16},
                run_policy=budget)
    assert body["spec"]["runPolicy"] == {"jobMaxRetryCount": 9, "cleanPodPolicy": "None", "restartPolicy": {
        "numRestartBeforeFullJobRestart": 0, "evalPeriodSeconds": 600, "maxFullJobRestarts": 4}}
    [c] = body["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"]
    assert c["command"][:5] == ["hyperpodrun", "--nnodes=2", "--nproc-per-node=auto", "-m", "swift.cli.sft"]
    assert _flags(c["command"]) == {
        "model": "Qwen/Qwen2.5-0.5B-Instruct", "dataset": "/s3/data/chat.jsonl", "train_type": "full",
        "output_dir": "/s3/output/ms-swift", "max_length": "2048", "per_device_train_batch_size": "1",
        "gradient_accumulation_steps": "8", "learning_rate": "0.0001", "num_train_epochs": "1.0",
        "lora_rank": "16", "torch_dtype": "bfloat16",
    }
    assert {e["name"]: e["value"] for e in c["env"]}["USE_HF"] == "1"
    assert c["image"] == recipes()["ms-swift"].image


def test_elastic_jobs_render_a_node_range() -> None:
    body = _job("pytorch", {"args": "--lr 0.1 --seed 7"}, elastic=(1, 4))
    [c] = body["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"]
    assert c["command"] == ["hyperpodrun", "--nnodes=1:4", "--nproc-per-node=auto", "/s3/code/train.py",
                            "--output-dir", "/s3/output", "--epochs", "1", "--lr", "0.1", "--seed", "7"]
    assert body["spec"]["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 4}


@pytest.mark.parametrize(("recipe", "fields", "words"), [
    ("ms-swift", {"dataset": "/data/x.jsonl"}, "fields.dataset: '/data/x.jsonl' is not under /s3"),
    ("ms-swift", {"outputDir": "/s3/../etc"}, "fields.outputDir: '/s3/../etc' is not under /s3"),
    ("llama-factory", {"finetuningType": "qlora"}, "'qlora' is not one of lora, full, freeze"),
    ("llama-factory", {"cutoffLen": 8}, "fields.cutoffLen: 8 is outside [16.0, 131072.0]"),
    ("llama-factory", {"epochs": "three"}, "fields.epochs: 'three' is not a float"),
    ("pytorch", {"lr": 1}, "fields.lr: not a field of recipe pytorch"),
    ("ms-swift", {"configFile": "/fsx/sft.json"}, "fields.configFile: '/fsx/sft.json' is not a file under /s3"),
    ("ms-swift", {"configFile": "/s3/"}, "fields.configFile: '/s3/' is not a file under /s3"),
    ("ms-swift", {"configFile": "/s3/a/./sft.json"}, "fields.configFile: '/s3/a/./sft.json' has '.'/'..' steps"),
    ("ms-swift", {"configFile": "/s3/sft.yaml"}, "fields.configFile: '/s3/sft.yaml' does not end in .json"),
    ("llama-factory", {"configFile": "/s3/sft.toml"}, "'/s3/sft.toml' does not end in .yaml or .yml or .json"),
    ("llama-factory", {"configFile": "/s3/sft.yaml", "epochs": 2}, "fields.epochs: is set by your config file"),
])
def test_bad_fields_are_refused_naming_the_field(recipe: str, fields: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        render(recipes()[recipe], fields)
    assert words in str(caught.value)


def test_a_config_file_replaces_the_fields_and_is_the_file_to_find() -> None:
    lf, swift = recipes()["llama-factory"], recipes()["ms-swift"]
    words, env, values = render(lf, {"configFile": "/s3/configs/sft.json", "template": "qwen"})  # qwen: the default
    assert words == ["-m", "llamafactory.launcher", "/s3/configs/sft.json"] and env == {"HF_HOME": "/s3/hf-cache"}
    assert config_files(lf, values) == {"fields.configFile": "/s3/configs/sft.json"} and needs_s3(lf, values)
    words, _, values = render(swift, {"configFile": "/s3//configs/sft.json"})
    assert words == ["-m", "swift.cli.sft", "/s3//configs/sft.json"]  # the entry point's JSON argument file
    assert config_files(swift, render(swift, {})[2]) == {}  # unset: the fields' entry, nothing to look up
    assert object_key("clusters/t/data/", "/s3//configs/sft.yml") == "clusters/t/data/configs/sft.yml"
    assert object_key("", "/s3/sft.yaml") == "sft.yaml"


def test_a_config_field_is_only_for_hyperpod_recipes_with_a_config_entry() -> None:
    lf = recipes()["llama-factory"].model_dump(by_alias=True)
    with pytest.raises(ValueError, match="a config field needs path hyperpod"):
        Recipe.model_validate({**lf, "path": "kuberay"})
    with pytest.raises(ValueError, match="a config field needs path hyperpod, a configEntry"):
        Recipe.model_validate({**lf, "configEntry": None})


def test_entry_and_name_rules() -> None:
    assert entry_words("python train.py --epochs 3") == ["train.py", "--epochs", "3"]
    for launcher in ("torchrun --nproc-per-node 8 train.py", "python -m torch.distributed.run train.py",
                     "hyperpodrun train.py"):
        with pytest.raises(InvalidInput, match="starts with the launcher"):
            entry_words(launcher)
    with pytest.raises(InvalidInput, match="'Bad_Name' is not a DNS label"):
        checks.check_name("Bad_Name")
    with pytest.raises(InvalidInput, match=r"2 GPUs per node, but ml\.g6\.4xlarge has 1"):
        checks.gpus_per_node("ml.g6.4xlarge", 2)
    assert checks.gpus_per_node("ml.g6.12xlarge", None) == 4


def test_verl_renders_into_a_rayjob_field_by_field() -> None:
    from instantstart.manifests import ray_job as ray_job_manifests

    recipe = recipes()["verl"]
    words, env, _ = render(recipe, {"model": "/s3/models/qwen", "algorithm": "gae", "epochs": 3,
                                    "args": "actor_rollout_ref.rollout.n=5"}, {"nodes": "2", "gpusPerNode": "8"})
    body = ray_job_manifests.ray_job(
        ray_job_manifests.RayJobSpec(
            name="rl",
            namespace="team-a",
            image=recipe.image,
            entrypoint=words,
            workers=2,
            worker=PodResources(gpus=8, efa=32, cpu_milli=177000, memory_mib=1882 * 1024, efa_rdma=True),
            instance_type="ml.p5.48xlarge",
            env=env,
            s3_claim="s3-claim",
            recipe="verl",
            backoff_limit=2,
        )
    )
    assert body["apiVersion"] == "ray.io/v1" and body["kind"] == "RayJob"
    assert body["metadata"]["labels"][training_manifests.LABEL_RECIPE] == "verl"
    spec = body["spec"]
    assert spec["submissionMode"] == "K8sJobMode" and spec["shutdownAfterJobFinishes"] is True
    assert spec["backoffLimit"] == 2
    import shlex

    overrides = dict(w.split("=", 1) for w in shlex.split(spec["entrypoint"])[3:])
    assert spec["entrypoint"].startswith("python3 -m verl.trainer.main_ppo ")
    assert overrides == {
        "algorithm.adv_estimator": "gae", "data.train_files": "/s3/data/gsm8k/train.parquet",
        "data.val_files": "/s3/data/gsm8k/test.parquet", "data.train_batch_size": "256",
        "data.max_prompt_length": "512", "data.max_response_length": "1024",
        "actor_rollout_ref.model.path": "/s3/models/qwen", "actor_rollout_ref.actor.optim.lr": "1e-06",
        "trainer.total_epochs": "3", "trainer.default_local_dir": "/s3/output/verl", "trainer.nnodes": "2",
        "trainer.n_gpus_per_node": "8", "trainer.logger": "[console]", "actor_rollout_ref.rollout.n": "5",
    }
    cluster = spec["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]["spec"]
    assert head["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "8Gi"}  # no GPU, not even 0
    [workers] = cluster["workerGroupSpecs"]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (2, 2, 2)
    pod = workers["template"]["spec"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}
    [c] = pod["containers"]
    assert c["image"] == recipe.image and c["resources"]["limits"] == {
        "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "memory": f"{1882 * 1024}Mi"}
    assert c["resources"]["requests"]["cpu"] == "177"
    assert not any(e["name"] == "FI_PROVIDER" for e in head["containers"][0]["env"])
    assert {v["mountPath"] for v in c["volumeMounts"]} == {"/dev/shm", "/s3"}
    assert {"name": "s3", "persistentVolumeClaim": {"claimName": "s3-claim"}} in pod["volumes"]
    assert {e["name"]: e["value"] for e in c["env"]} == {  # the workers' EFA env, then the recipe's
        "FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1", "NCCL_SOCKET_IFNAME": "^lo,docker",
        "FI_EFA_USE_DEVICE_RDMA": "1", "HF_HOME": "/s3/hf-cache"}


def test_a_tracked_job_runs_as_the_mlflow_writer_service_account_on_both_paths() -> None:
    from instantstart.manifests import ray_job as ray_job_manifests

    env = {"MLFLOW_TRACKING_URI": "arn:aws:sagemaker:us-west-2:123456789012:mlflow-tracking-server/t"}
    job = training_manifests.job(
        training_manifests.JobSpec(
            name="j",
            namespace="default",
            image="i",
            entry=["train.py"],
            nodes=1,
            nproc_per_node="auto",
            resources=PodResources(gpus=1),
            instance_type="ml.g6.4xlarge",
            env=env,
            service_account="instantstart-training",
        )
    )
    pod = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    assert pod["serviceAccountName"] == "instantstart-training"
    assert {"name": "MLFLOW_TRACKING_URI", "value": env["MLFLOW_TRACKING_URI"]} in pod["containers"][0]["env"]
    ray = ray_job_manifests.ray_job(
        ray_job_manifests.RayJobSpec(
            name="rl",
            namespace="default",
            image="i",
            entrypoint=["python3", "a.py"],
            workers=1,
            worker=PodResources(gpus=1),
            instance_type="ml.g6.4xlarge",
            env=env,
            service_account="instantstart-training",
        )
    )
    cluster = ray["spec"]["rayClusterSpec"]
    templates = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    assert [t["spec"]["serviceAccountName"] for t in templates] == ["instantstart-training"] * 2
    untracked = training_manifests.job(
        training_manifests.JobSpec(
            name="j",
            namespace="default",
            image="i",
            entry=["train.py"],
            nodes=1,
            nproc_per_node="auto",
            resources=PodResources(gpus=1),
            instance_type="ml.g6.4xlarge",
        )
    )
    assert "serviceAccountName" not in untracked["spec"]["replicaSpecs"][0]["template"]["spec"]


def test_ray_network_policy_admits_only_the_jobs_own_pods_the_submitter_and_the_operator() -> None:
    from instantstart.manifests import ray_job as ray_job_manifests
    from instantstart.services.dependencies.catalog import load_catalog

    body = ray_job_manifests.ray_job(
        ray_job_manifests.RayJobSpec(
            name="rl",
            namespace="team-a",
            image="example/ray:1",
            entrypoint=["python3"],
            workers=1,
            worker=PodResources(gpus=1),
            instance_type="ml.g6.4xlarge",
        )
    )
    cluster = body["spec"]["rayClusterSpec"]
    for template in (cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][0]["template"]):
        assert template["metadata"]["labels"][ray_job_manifests.JOB_LABEL] == "rl"  # what the policy selects
    policy = ray_job_manifests.network_policy("rl", "team-a", "uid-1")
    assert policy["kind"] == "NetworkPolicy" and policy["metadata"]["namespace"] == "team-a"
    assert policy["metadata"]["ownerReferences"] == [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rl",
                                                      "uid": "uid-1"}]
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {ray_job_manifests.JOB_LABEL: "rl"}} and spec["policyTypes"] == [
        "Ingress"
    ]
    own, submitter, operator = spec["ingress"]
    assert own == {
        "from": [{"podSelector": {"matchLabels": {ray_job_manifests.JOB_LABEL: "rl"}}}]
    }  # no namespaceSelector: same ns
    assert submitter["from"] == [{"podSelector": {"matchLabels": {ray_job_manifests.SUBMITTER_LABEL: "rl"}}}]
    assert submitter["ports"] == operator["ports"] == [{"protocol": "TCP", "port": 8265}]
    [peer] = operator["from"]
    [kuberay] = [d for d in load_catalog().dependencies if d.name == "kuberay-operator"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": kuberay.namespace}}
    assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}}
    assert "ownerReferences" not in ray_job_manifests.network_policy("rl", "team-a")["metadata"]
