"""What each command group (the first word of a tool name) is about: CLI group help and OpenAPI tags."""

from __future__ import annotations

GROUP_DESCRIPTIONS: dict[str, str] = {
    "cluster": "Create, import, inspect, switch and delete HyperPod-on-EKS clusters; EKS node groups; "
    "events and preflight checks.",
    "hyperpod": "The HyperPod cluster itself: creation, instance groups, nodes (reboot, replace, delete), "
    "software updates and advanced features.",
    "karpenter": "HyperPod managed Karpenter: install, uninstall and status.",
    "s3": "Mountpoint for Amazon S3 storage: the persistent volume and claim, and the bucket's contents.",
    "operation": "Persisted operations: get, list, retry from the failed stage, cancel.",
    "util": "Utilities for agents and scripts, such as waiting between status polls.",
    "pod": "Pods of the active cluster: bounded log tails.",
    "node": "Kubernetes nodes of the active cluster: labels, taints, conditions, HyperPod health, GPUs and pods.",
    "inference": "Model serving: self-managed model servers, the model pool, the SGLang router and KEDA "
    "autoscaling, managed endpoints (InferenceEndpointConfig) with lint, and calling a model.",
    "job": "Every job on the cluster (training jobs and Kubernetes Jobs): list and status.",
    "model": "Models in S3 storage: download from Hugging Face on CPU, list, download status.",
    "fsx": "FSx for Lustre volumes: create a file system (or adopt one) with its claim, and list them.",
    "storage": "Every storage claim of the cluster (S3 and FSx for Lustre): list and delete.",
    "training": "Training jobs on both paths (HyperPodPyTorchJob, KubeRay RayJob) and recipes: submit, list, "
    "logs, delete.",
    "monitoring": "Monitoring views backed by the observability add-on: GPU utilisation from the cluster's "
    "Amazon Managed Prometheus workspace (PromQL) and the links to the workspace and to Grafana.",
    "mlflow": "SageMaker managed MLflow for training: create or attach the cluster's tracking server and the "
    "training pods' write access (training_history reads the runs).",
    "user": "Users and roles (viewer, member, operator, admin): who am I, and the admin's user management.",
    "token": "Your named, expiring API tokens: create (shown once), list, revoke.",
    "audit": "The audit trail: who called what, through which face and token, and the outcome (admin).",
    "team": "Teams as HyperPod task governance: a namespace, its Kueue queue and a compute quota per team, with "
    "members.",
    "usage": "Accelerator usage: GPU-hours, Neuron-device-hours and node-hours per team and per user, with CSV.",
    "ray": "Ray-native training on KubeRay: submit a RayJob with its own Ray cluster on HyperPod nodes.",
    "workspace": "Files of an S3 claim, one by one through the control plane (list, read, write, delete), and "
    "`workspace sync`: a local folder and the claim kept in step both ways, without AWS credentials.",
    "alert": "Alerts opened and resolved by themselves from the timeline and the watched state: list, rule "
    "thresholds, notification channels (Amazon SNS, signed webhook).",
}


def group_description(group: str) -> str:
    """The description of a command group; a group missing here is a catalog error, caught by a test."""
    return GROUP_DESCRIPTIONS.get(group, f"{group} tools")
