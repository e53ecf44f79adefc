"""The model download Job: CPU only, stages on the node's NVMe (else an emptyDir), copies into an S3 claim,
writes a manifest (files, sizes, sha256) last; the Hugging Face token only as a secretKeyRef."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from instantstart.manifests.labels import INSTANCE_TYPE_LABEL, MANAGED_LABELS

NVME_HOST_PATH = "/opt/dlami/nvme"
MODELS_DIR = "models"
MANIFEST = "manifest.json"
TOKEN_KEY = "token"
LABEL_COMPONENT = "app.kubernetes.io/component"
COMPONENT = "model-download"
LABEL_MODEL = "instantstart.io/model"
LABEL_TOKEN = "instantstart.io/hf-token"
ANNOTATION_EXPIRES = "instantstart.io/orphan-after"
MARKER = "instantstart-model-download"
# Background work (model downloads) runs below every workload's priority (0) and never preempts: a pod that
# needs the node a download runs on preempts the download (kube-scheduler's DefaultPreemption), so a
# download can never keep a GPU pod from scheduling. The Job retries the preempted pod without counting it
# against backoffLimit (podFailurePolicy: Ignore on the DisruptionTarget condition).
BACKGROUND_PRIORITY_CLASS = "instantstart-background"
BACKGROUND_PRIORITY = -10

# The container's program: download to the staging directory, copy file by file into the mount, then the
# manifest. Progress lines are JSON objects prefixed "progress " (the operation reads the last one).
SCRIPT = f"""# {MARKER}
import hashlib, json, os, shutil, sys
from huggingface_hub import snapshot_download
model, rev, dest = os.environ["MODEL_ID"], os.environ["REVISION"], os.environ["DEST_DIR"]
nvme = "/host-nvme"  # this model's own directory on the NVMe, nothing else of the node's disk
fast = os.path.isdir(nvme) and os.stat(nvme).st_dev != os.stat("/").st_dev
stage = nvme if fast else os.path.join("/scratch", "instantstart", model.replace("/", "--"), rev)
print("staging on " + ("instance NVMe" if fast else "emptyDir") + " " + stage, flush=True)
if os.path.exists(os.path.join(dest, "{MANIFEST}")):
    print("already present", flush=True); sys.exit(0)
snapshot_download(repo_id=model, revision=rev, local_dir=stage, token=os.environ.get("HF_TOKEN") or None)
files = sorted(os.path.relpath(os.path.join(d, f), stage) for d, _, fs in os.walk(stage) for f in fs
               if not os.path.relpath(os.path.join(d, f), stage).startswith(".cache"))
total = sum(os.path.getsize(os.path.join(stage, f)) for f in files)
done, entries = 0, []
for i, rel in enumerate(files):
    src, dst = os.path.join(stage, rel), os.path.join(dest, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    h = hashlib.sha256()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        for chunk in iter(lambda: fin.read(8 << 20), b""):
            h.update(chunk); fout.write(chunk)
    size = os.path.getsize(src); done += size
    entries.append({{"path": rel, "size": size, "sha256": h.hexdigest()}})
    print("progress " + json.dumps({{"files": i + 1, "filesTotal": len(files), "bytes": done, "bytesTotal": total}}),
          flush=True)
manifest = {{"modelId": model, "revision": rev, "files": entries, "totalBytes": total}}
with open(os.path.join(dest, "{MANIFEST}"), "w") as f:
    json.dump(manifest, f)
for entry in os.listdir(stage):  # the staging files go; the directory itself is the mount
    path = os.path.join(stage, entry)
    shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)
print("done " + str(len(entries)) + " files", flush=True)
"""

_NAME_SAFE = re.compile(r"[^a-z0-9-]+")


def model_dir(model_id: str, revision: str) -> str:
    """Where a model lives inside the claim: models/<modelId>/<revision>."""
    return f"{MODELS_DIR}/{model_id}/{revision}"


def job_name(model_id: str, revision: str) -> str:
    """A DNS-1123 Job name unique per model and revision: model-dl-<slug>-<hash8>."""
    digest = hashlib.sha256(f"{model_id}@{revision}".encode()).hexdigest()[:8]
    slug = _NAME_SAFE.sub("-", model_id.lower()).strip("-")[:40].strip("-")
    return f"model-dl-{slug}-{digest}"


def token_secret(name: str, namespace: str, token_b64: str, orphan_after: str) -> dict[str, Any]:
    """The Secret holding the Hugging Face token (value already base64), owned by nobody; deleted when the
    download ends, and by the next download once `orphan_after` (ISO time) passed if no download names it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**MANAGED_LABELS, LABEL_COMPONENT: COMPONENT, LABEL_TOKEN: "true"},
            "annotations": {ANNOTATION_EXPIRES: orphan_after},
        },
        "data": {TOKEN_KEY: token_b64},
    }


def staging_dir(model_id: str, revision: str) -> str:
    """The model's own staging directory on the node's NVMe: <nvme>/instantstart/<org>--<name>/<revision> (the
    only part of the NVMe the Job mounts; model ids and revisions never hold '..' segments or a leading dot)."""
    parts = [*model_id.split("/"), revision]
    if any(not part or part.startswith(".") or "/" in part for part in parts) or len(parts) > 3:
        raise ValueError(f"not a model id and revision: {model_id!r} {revision!r}")
    return f"{NVME_HOST_PATH}/instantstart/{model_id.replace('/', '--')}/{revision}"


def background_priority_class() -> dict[str, Any]:
    """The PriorityClass of background Jobs: below the default priority 0, preemptionPolicy Never."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": BACKGROUND_PRIORITY_CLASS, "labels": dict(MANAGED_LABELS)},
        "value": BACKGROUND_PRIORITY,
        "globalDefault": False,
        "preemptionPolicy": "Never",
        "description": "InstantStart background Jobs (model downloads): any workload pod preempts them; they "
        "never preempt anything.",
    }


def build_job(
    *,
    name: str,
    namespace: str,
    model_id: str,
    revision: str,
    claim: str,
    cpu: str,
    memory_gi: str,
    token_secret_name: str | None,
    gpu_instance_types: list[str],
    hf_endpoint: str | None = None,
    image: str,
) -> dict[str, Any]:
    """The download Job: requests cpu/memory only (never nvidia.com/gpu, NVIDIA_VISIBLE_DEVICES=void),
    prefers nodes that are not GPU instance types, runs at the background priority (any workload pod preempts
    it), mounts the claim at /models and only the model's own NVMe directory (`staging_dir`, created when absent)
    at /host-nvme.
    `image` must already hold python3 and huggingface_hub: the container installs nothing."""
    env = _env(model_id, revision, hf_endpoint, token_secret_name)
    resources = {"cpu": cpu, "memory": f"{memory_gi}Gi"}
    labels = {**MANAGED_LABELS, LABEL_COMPONENT: COMPONENT, LABEL_MODEL: job_name(model_id, revision)[9:]}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "priorityClassName": BACKGROUND_PRIORITY_CLASS,
        "containers": [
            {
                "name": "download",
                "image": image,
                # Kubernetes expands $(SCRIPT) from the container's env; no shell, no install step.
                "command": ["python3", "-c", "$(SCRIPT)"],
                "env": [*env, {"name": "SCRIPT", "value": SCRIPT}],
                "resources": {"requests": dict(resources), "limits": dict(resources)},
                "volumeMounts": [
                    {"name": "models", "mountPath": "/models"},
                    {"name": "nvme", "mountPath": "/host-nvme"},
                    {"name": "scratch", "mountPath": "/scratch"},
                ],
            }
        ],
        "volumes": [
            {"name": "models", "persistentVolumeClaim": {"claimName": claim}},
            {"name": "nvme", "hostPath": {"path": staging_dir(model_id, revision), "type": "DirectoryOrCreate"}},
            {"name": "scratch", "emptyDir": {}},
        ],
    }
    if gpu_instance_types:
        pod_spec["affinity"] = _off_gpu_nodes(gpu_instance_types)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 2,
            # A pod preempted for a workload (condition DisruptionTarget) is retried without counting as a failure.
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def _env(model_id: str, revision: str, hf_endpoint: str | None, token_secret_name: str | None) -> list[dict[str, Any]]:
    """The download container's environment: what to fetch, where to, no GPU, and the token by reference."""
    env: list[dict[str, Any]] = [
        {"name": "MODEL_ID", "value": model_id},
        {"name": "REVISION", "value": revision},
        {"name": "DEST_DIR", "value": f"/models/{model_dir(model_id, revision)}"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
    ]
    if hf_endpoint:
        env.append({"name": "HF_ENDPOINT", "value": hf_endpoint})
    if token_secret_name:
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": token_secret_name, "key": TOKEN_KEY}}})
    return env


def _off_gpu_nodes(gpu_instance_types: list[str]) -> dict[str, Any]:
    """An affinity preferring nodes that are not one of the GPU instance types (a download needs no GPU)."""
    term = {"key": INSTANCE_TYPE_LABEL, "operator": "NotIn", "values": sorted(gpu_instance_types)}
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [term]}}
            ]
        }
    }
