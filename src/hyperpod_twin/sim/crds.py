"""CRDs the simulator installs when an EKS add-on (or HyperPod autoscaling) becomes active."""

from __future__ import annotations

from hyperpod_twin.crds import crd as real_crd
from hyperpod_twin.sim.kobj import Obj

# EKS add-on names (FACTS §4.2) → the CRD bundle the add-on installs.
ADDON_BUNDLES: dict[str, str] = {
    "amazon-sagemaker-hyperpod-training-operator": "training-operator",
    "amazon-sagemaker-hyperpod-inference": "inference-operator",
    "cert-manager": "cert-manager",
    # Task governance installs Kueue (FACTS §4.2) and syncs its queues and priority classes.
    "amazon-sagemaker-hyperpod-taskgovernance": "task-governance",
}


_REAL = {
    "training-operator": ["hyperpodpytorchjobs.sagemaker.amazonaws.com"],
    "inference-operator": [
        "inferenceendpointconfigs.inference.sagemaker.aws.amazon.com",
        "jumpstartmodels.inference.sagemaker.aws.amazon.com",
        "sagemakerendpointregistrations.inference.sagemaker.aws.amazon.com",
    ],
    "cert-manager": [
        "certificates.cert-manager.io",
        "certificaterequests.cert-manager.io",
        "issuers.cert-manager.io",
        "clusterissuers.cert-manager.io",
    ],
    # HyperPod-managed Karpenter (FACTS §6.3): NodePool/NodeClaim from karpenter.sh, the HyperPod node class.
    "karpenter": [
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "hyperpodnodeclasses.karpenter.sagemaker.amazonaws.com",
    ],
    "task-governance": [
        "clusterqueues.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io",
        "workloadpriorityclasses.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
    ],
    # KubeRay and KEDA arrive through helm charts (whose crds/ carry the same definitions); these
    # bundles let a test or the simulator install them too.
    "kuberay": ["rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io"],
    "keda": [
        "scaledobjects.keda.sh",
        "scaledjobs.keda.sh",
        "triggerauthentications.keda.sh",
        "clustertriggerauthentications.keda.sh",
    ],
}


def _labelled(name: str) -> Obj:
    definition = real_crd(name)
    definition["metadata"].setdefault("labels", {})["app.kubernetes.io/managed-by"] = "twin-eks-addon"
    return definition


BUNDLES: dict[str, list[Obj]] = {bundle: [_labelled(n) for n in names] for bundle, names in _REAL.items()}


def crd_manifests(bundle: str) -> list[Obj]:
    """The CustomResourceDefinitions of a bundle (KeyError for an unknown bundle)."""
    import copy

    return copy.deepcopy(BUNDLES[bundle])
