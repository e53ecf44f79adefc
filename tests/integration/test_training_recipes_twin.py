"""The promised recipe paths end to end on the twin, through MCP: LLaMA-Factory and MS-Swift submitted with
training_recipe_submit run to Completed, from their fields and from the user's own config file in the S3 claim;
a config file missing from the bucket is refused before anything reaches Kubernetes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from instantstart.manifests import iam_policies as pol
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import until

TAG = "rcp1"
DATA = pol.data_prefix(TAG)  # the default claim mounts the cluster's data prefix of the project bucket
LAUNCH = ["hyperpodrun", "--nnodes=1", "--nproc-per-node=auto"]


def finished(cp: Running, name: str) -> dict[str, Any]:
    """job_get_status once the job is Completed or Failed."""
    def check() -> dict[str, Any] | None:
        [status] = mcp_calls(cp, [("job_get_status", {"jobName": name})])
        return status if status["job"]["state"] in ("Completed", "Failed") else None

    found: dict[str, Any] = until(check, f"job {name} finished", timeout=180, every=0.2)
    return found


def submit(cp: Running, body: dict[str, Any]) -> None:
    [ref] = mcp_calls(cp, [("training_recipe_submit", body)])
    assert ref["statusTool"] == "job_get_status"
    view = mcp_wait(cp, ref["operationId"])
    assert view["status"] == "SUCCEEDED", view


def test_llama_factory_and_ms_swift_complete_from_fields_and_from_a_config_file(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)
    for call in mcp_calls(cp, [("hyperpod_update_advanced_features", {"trainingOperator": {"enabled": True}})]):
        assert mcp_wait(cp, call["operationId"])["status"] == "SUCCEEDED"
    [storage] = mcp_calls(cp, [("s3_storage_create", {})])
    assert mcp_wait(cp, storage["operationId"])["status"] == "SUCCEEDED"
    bucket = mcp_calls(cp, [("s3_storage_get_defaults", {})])[0]["bucketName"]
    s3: Any = twin_client(twin, "s3")
    objects = k8s.CustomObjectsApi(kube(twin, tmp_path, TAG).api_client)

    def jobs() -> set[str]:
        listed = objects.list_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "default",
                                                       "hyperpodpytorchjobs")["items"]
        return {j["metadata"]["name"] for j in listed}

    # From the recipes' fields (the data the defaults name is in the bucket, as a user would put it there).
    s3.put_object(Bucket=bucket, Key=f"{DATA}data/dataset_info.json", Body=b'{"alpaca_en_demo": {}}')
    s3.put_object(Bucket=bucket, Key=f"{DATA}data/train.jsonl", Body=b'{"messages": []}\n')
    submit(cp, {"recipe": "llama-factory", "jobName": "lf", "fields": {"epochs": 1.0}})
    submit(cp, {"recipe": "ms-swift", "jobName": "swift", "fields": {"trainType": "full"}})
    lf, swift = finished(cp, "lf"), finished(cp, "swift")
    assert lf["job"]["state"] == "Completed" and lf["job"]["recipe"] == "llama-factory", lf
    assert lf["command"][:5] == [*LAUNCH, "-m", "llamafactory.launcher"]
    assert "--num_train_epochs" in lf["command"] and lf["image"] == "hiyouga/llamafactory:0.9.3"
    assert swift["job"]["state"] == "Completed" and swift["job"]["recipe"] == "ms-swift", swift
    assert swift["command"][:5] == [*LAUNCH, "-m", "swift.cli.sft"]
    assert swift["command"][swift["command"].index("--train_type") + 1] == "full"

    # The user's own config file, not in the bucket: refused naming the field and the object looked for; no job.
    refused = mcp_raw(cp, [
        ("training_recipe_submit", {"recipe": "ms-swift", "jobName": "swift-cfg",
                                    "fields": {"configFile": "/s3/configs/swift-sft.json"}}),
        ("training_recipe_submit", {"recipe": "llama-factory", "jobName": "lf-cfg",
                                    "fields": {"configFile": "/s3/configs/../../etc/sft.yaml"}}),
        ("training_recipe_submit", {"recipe": "llama-factory", "jobName": "lf-cfg",
                                    "fields": {"configFile": "/s3/configs/sft.toml"}}),
    ])[:3]
    missing, escaping, suffix = (r["payload"]["error"] for r in refused)
    assert all(r["isError"] for r in refused), refused
    assert missing["code"] == "INVALID_INPUT"
    assert missing["details"]["fields"][0]["field"] == "fields.configFile"
    assert f"no object s3://{bucket}/{DATA}configs/swift-sft.json" in missing["message"], missing
    assert f"aws s3 cp <file> s3://{bucket}/{DATA}configs/swift-sft.json" in missing["hint"]
    assert "fields.configFile" in escaping["message"] and "is not a file under /s3" in escaping["message"]
    assert "does not end in .yaml or .yml or .json" in suffix["message"], suffix
    assert not jobs() & {"swift-cfg", "lf-cfg"}

    # Uploaded (as a user does, through the bucket): each job runs from it to Completed.
    s3.put_object(Bucket=bucket, Key=f"{DATA}configs/swift-sft.json", Body=b'{"model": "Qwen/Qwen2.5-0.5B-Instruct"}')
    s3.put_object(Bucket=bucket, Key=f"{DATA}configs/lf-sft.yaml", Body=b"stage: sft\ndo_train: true\n")
    submit(cp, {"recipe": "ms-swift", "jobName": "swift-cfg", "fields": {"configFile": "/s3/configs/swift-sft.json"}})
    submit(cp, {"recipe": "llama-factory", "jobName": "lf-cfg",
                "fields": {"configFile": "/s3/configs/lf-sft.yaml", "template": "qwen"}})  # the default: no conflict
    swift_cfg, lf_cfg = finished(cp, "swift-cfg"), finished(cp, "lf-cfg")
    assert swift_cfg["job"]["state"] == "Completed", swift_cfg
    assert swift_cfg["command"] == [*LAUNCH, "-m", "swift.cli.sft", "/s3/configs/swift-sft.json"]
    assert lf_cfg["job"]["state"] == "Completed", lf_cfg
    assert lf_cfg["command"] == [*LAUNCH, "-m", "llamafactory.launcher", "/s3/configs/lf-sft.yaml"]
    assert {"swift-cfg", "lf-cfg"} <= jobs()
    # A field besides the config file is refused: the file decides it.
    [both] = mcp_raw(cp, [("training_recipe_submit", {"recipe": "ms-swift", "jobName": "swift-both", "fields": {
        "configFile": "/s3/configs/swift-sft.json", "epochs": 3.0}})])[:1]
    assert both["isError"] and "fields.epochs: is set by your config file" in both["payload"]["error"]["message"]
