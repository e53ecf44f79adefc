"""EKS add-ons: the versions catalog HyperPod clusters use, and their lifecycle on the twin clock.

An add-on goes CREATING → ACTIVE after a minute of twin time, unless EKS would report it
otherwise: an add-on whose prerequisite add-ons (FACTS §4.2) are not installed, or whose controller
Deployment has no node to run on, is DEGRADED with a health issue (InsufficientNumberOfReplicas, as
EKS reports pods that cannot become ready) and turns ACTIVE by itself once the cause is gone; scripted
`addon_failure` faults make a create end CREATE_FAILED or DEGRADED and an update UPDATE_FAILED.
The API handlers live in `eks_addon_api.py`.
"""

from __future__ import annotations

from typing import Any

from .eks_clusters import K8S_VERSIONS

# name -> (type, publisher, owner, [versions newest first], default namespace). Versions satisfy the
# minimums the HyperPod inference operator documents (FACTS §4.2).
CATALOG: dict[str, tuple[str, str, str, list[str], str]] = {
    "vpc-cni": ("networking", "eks", "aws", ["v1.20.4-eksbuild.2", "v1.19.6-eksbuild.7"], "kube-system"),
    "coredns": ("networking", "eks", "aws", ["v1.12.3-eksbuild.1", "v1.11.4-eksbuild.14"], "kube-system"),
    "kube-proxy": (
        "networking",
        "eks",
        "aws",
        ["v1.34.1-eksbuild.2", "v1.33.3-eksbuild.4", "v1.32.6-eksbuild.8", "v1.31.10-eksbuild.8",
         "v1.30.14-eksbuild.6", "v1.29.15-eksbuild.11", "v1.28.15-eksbuild.27"],
        "kube-system",
    ),
    "eks-pod-identity-agent": ("security", "eks", "aws", ["v1.3.8-eksbuild.2", "v1.3.7-eksbuild.2"], "kube-system"),
    "aws-ebs-csi-driver": ("storage", "eks", "aws", ["v1.48.0-eksbuild.2", "v1.46.0-eksbuild.1"], "kube-system"),
    "aws-mountpoint-s3-csi-driver": (
        "storage",
        "s3",
        "aws",
        ["v2.0.0-eksbuild.1", "v1.15.0-eksbuild.1", "v1.14.1-eksbuild.1"],
        "kube-system",
    ),
    "aws-fsx-csi-driver": ("storage", "eks", "aws", ["v1.7.0-eksbuild.1", "v1.6.0-eksbuild.1"], "kube-system"),
    "metrics-server": (
        "observability",
        "eks",
        "aws",
        ["v0.8.0-eksbuild.2", "v0.7.2-eksbuild.4"],
        "kube-system",
    ),
    "cert-manager": ("security", "eks", "aws", ["v1.18.2-eksbuild.2", "v1.17.2-eksbuild.1"], "cert-manager"),
    "amazon-cloudwatch-observability": (
        "observability",
        "eks",
        "aws",
        ["v4.4.0-eksbuild.1"],
        "amazon-cloudwatch",
    ),
    "amazon-sagemaker-hyperpod-training-operator": (
        "machine-learning",
        "sagemaker",
        "aws",
        ["v1.2.0-eksbuild.1", "v1.1.0-eksbuild.1", "v1.0.1-eksbuild.1"],
        "aws-hyperpod",
    ),
    "amazon-sagemaker-hyperpod-inference": (
        "machine-learning",
        "sagemaker",
        "aws",
        ["v1.1.0-eksbuild.1", "v1.0.0-eksbuild.1"],
        "hyperpod-inference-system",
    ),
    "amazon-sagemaker-hyperpod-observability": (
        "observability",
        "sagemaker",
        "aws",
        ["v1.1.0-eksbuild.1", "v1.0.0-eksbuild.1"],
        "hyperpod-observability",
    ),
    "amazon-sagemaker-hyperpod-taskgovernance": (
        "machine-learning",
        "sagemaker",
        "aws",
        ["v1.2.0-eksbuild.1", "v1.1.0-eksbuild.1"],
        "kueue-system",
    ),
}


# The version matrix: add-on version -> the Kubernetes minor versions it runs on (first, last). A version not
# listed runs on every version the twin offers. As on EKS, kube-proxy follows the cluster's minor version and an
# older CoreDNS stops at the minor its successor took over from, so an upgrade has add-ons to move.
SUPPORT: dict[str, dict[str, tuple[str, str]]] = {
    "kube-proxy": {v: (f"1.{v.split('.')[1]}", f"1.{v.split('.')[1]}") for v in CATALOG["kube-proxy"][3]},
    "coredns": {"v1.11.4-eksbuild.14": ("1.28", "1.32"), "v1.12.3-eksbuild.1": ("1.30", "1.34")},
}


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def compatible(name: str, version: str, k8s: str) -> bool:
    """Whether add-on `name` at `version` runs on Kubernetes `k8s` (the twin's version matrix)."""
    first, last = SUPPORT.get(name, {}).get(version, (K8S_VERSIONS[0], K8S_VERSIONS[-1]))
    return _minor(first) <= _minor(k8s) <= _minor(last)


def default_version(name: str, k8s: str) -> str | None:
    """The version EKS installs by default on Kubernetes `k8s`: the newest compatible one."""
    return next((v for v in CATALOG[name][3] if compatible(name, v, k8s)), None)


def addon_info(name: str, k8s: str | None) -> dict[str, Any]:
    """DescribeAddonVersions entry for one add-on: with `k8s`, only the versions that run on it."""
    kind, publisher, owner, versions, namespace = CATALOG[name]
    clusters = [k8s] if k8s else list(K8S_VERSIONS)
    out_versions = []
    for version in versions:
        compat = [c for c in clusters if compatible(name, version, c)]
        if not compat:
            continue
        out_versions.append(
            {
                "addonVersion": version,
                "architecture": ["amd64", "arm64"],
                "computeTypes": ["ec2", "hyperpod"],
                "compatibilities": [
                    {"clusterVersion": c, "platformVersions": ["*"],
                     "defaultVersion": default_version(name, c) == version}
                    for c in compat
                ],
                "requiresConfiguration": False,
                "requiresIamPermissions": name.startswith("amazon-sagemaker-hyperpod") or "csi" in name,
            }
        )
    return {
        "addonName": name,
        "type": kind,
        "addonVersions": out_versions,
        "publisher": publisher,
        "owner": owner,
        "defaultNamespace": namespace,
    }


# Add-ons that need other add-ons installed first (FACTS §4.2: the training operator needs cert-manager
# and the Pod Identity agent; the inference operator the S3 and FSx CSI drivers, metrics-server and
# cert-manager).
PREREQUISITES: dict[str, tuple[str, ...]] = {
    "amazon-sagemaker-hyperpod-training-operator": ("cert-manager", "eks-pod-identity-agent"),
    "amazon-sagemaker-hyperpod-inference": (
        "aws-mountpoint-s3-csi-driver",
        "aws-fsx-csi-driver",
        "metrics-server",
        "cert-manager",
    ),
}
# Add-ons that are only DaemonSets: with no nodes they have nothing to wait for.
DAEMONSET_ONLY = {"vpc-cni", "kube-proxy", "eks-pod-identity-agent"}
REPLICAS_MESSAGE = "The add-on is unhealthy because it doesn't have the desired number of replicas."


def health_issues(name: str, installed: dict[str, str], has_nodes: bool) -> list[dict[str, Any]]:
    """The health issues EKS would report for add-on `name` (empty: healthy).

    `installed` maps the cluster's other add-ons to their status; `has_nodes` is whether any node can
    run the add-on's controller."""
    issues: list[dict[str, Any]] = []
    missing = [p for p in PREREQUISITES.get(name, ()) if installed.get(p) not in ("ACTIVE", "DEGRADED", "UPDATING")]
    if missing:
        issues.append(
            {
                "code": "InsufficientNumberOfReplicas",
                "message": f"{REPLICAS_MESSAGE} Required add-on(s) not installed: {', '.join(missing)}.",
                "resourceIds": [name],
            }
        )
    elif not has_nodes and name not in DAEMONSET_ONLY:
        issues.append({"code": "InsufficientNumberOfReplicas", "message": REPLICAS_MESSAGE, "resourceIds": [name]})
    return issues
