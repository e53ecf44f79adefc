"""CRDs the simulator installs when an EKS add-on (or HyperPod autoscaling) becomes active."""

from __future__ import annotations

from typing import Any

from hyperpod_twin.sim.kobj import Obj

# EKS add-on names (FACTS §4.2) → the CRD bundle the add-on installs.
ADDON_BUNDLES: dict[str, str] = {
    "amazon-sagemaker-hyperpod-training-operator": "training-operator",
    "amazon-sagemaker-hyperpod-inference": "inference-operator",
    "cert-manager": "cert-manager",
}


def _crd(
    group: str,
    kind: str,
    plural: str,
    *,
    versions: tuple[str, ...] = ("v1",),
    storage: str = "v1",
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    columns: tuple[tuple[str, str, str], ...] = (),
    scale: bool = False,
) -> Obj:
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        }
    printer = [{"name": n, "type": t, "jsonPath": p} for n, t, p in columns] + [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]
    names: Obj = {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"}
    if short:
        names["shortNames"] = list(short)
    if categories:
        names["categories"] = list(categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {"app.kubernetes.io/managed-by": "twin-eks-addon"}},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": v == storage,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    "subresources": subresources,
                    "additionalPrinterColumns": printer,
                }
                for v in versions
            ],
        },
    }


_STATUS = ("Status", "string", ".status.conditions[-1:].type")

BUNDLES: dict[str, list[Obj]] = {
    "training-operator": [
        _crd("sagemaker.amazonaws.com", "HyperPodPyTorchJob", "hyperpodpytorchjobs", columns=(_STATUS,)),
    ],
    "inference-operator": [
        _crd(
            "inference.sagemaker.aws.amazon.com",
            "InferenceEndpointConfig",
            "inferenceendpointconfigs",
            versions=("v1", "v1alpha1"),
            columns=(("State", "string", ".status.state"),),
            scale=True,
        ),
        _crd("inference.sagemaker.aws.amazon.com", "JumpStartModel", "jumpstartmodels", versions=("v1", "v1alpha1")),
        _crd(
            "inference.sagemaker.aws.amazon.com",
            "SageMakerEndpointRegistration",
            "sagemakerendpointregistrations",
            versions=("v1", "v1alpha1"),
        ),
    ],
    "cert-manager": [
        _crd(
            "cert-manager.io",
            "Certificate",
            "certificates",
            short=("cert", "certs"),
            categories=("cert-manager",),
            columns=(
                ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
                ("Secret", "string", ".spec.secretName"),
            ),
        ),
        _crd("cert-manager.io", "CertificateRequest", "certificaterequests", short=("cr", "crs")),
        _crd("cert-manager.io", "Issuer", "issuers", categories=("cert-manager",)),
        _crd("cert-manager.io", "ClusterIssuer", "clusterissuers", namespaced=False, categories=("cert-manager",)),
    ],
    # HyperPod-managed Karpenter (FACTS §6.3): NodePool/NodeClaim from karpenter.sh, the HyperPod node class.
    "karpenter": [
        _crd("karpenter.sh", "NodePool", "nodepools", namespaced=False, categories=("karpenter",)),
        _crd("karpenter.sh", "NodeClaim", "nodeclaims", namespaced=False, categories=("karpenter",)),
        _crd("karpenter.sagemaker.amazonaws.com", "HyperpodNodeClass", "hyperpodnodeclasses", namespaced=False),
    ],
    # KubeRay and KEDA arrive through helm charts (whose crds/ the chart repository carries); these
    # bundles let a test or the chart builder install the same definitions.
    "kuberay": [
        _crd("ray.io", "RayCluster", "rayclusters", columns=(("State", "string", ".status.state"),)),
        _crd("ray.io", "RayJob", "rayjobs", columns=(("Job Status", "string", ".status.jobStatus"),)),
        _crd("ray.io", "RayService", "rayservices"),
    ],
    "keda": [
        _crd("keda.sh", "ScaledObject", "scaledobjects", versions=("v1alpha1",), storage="v1alpha1", short=("so",)),
        _crd("keda.sh", "ScaledJob", "scaledjobs", versions=("v1alpha1",), storage="v1alpha1", short=("sj",)),
        _crd("keda.sh", "TriggerAuthentication", "triggerauthentications", versions=("v1alpha1",), storage="v1alpha1"),
        _crd(
            "keda.sh",
            "ClusterTriggerAuthentication",
            "clustertriggerauthentications",
            versions=("v1alpha1",),
            storage="v1alpha1",
            namespaced=False,
        ),
    ],
}


def crd_manifests(bundle: str) -> list[Obj]:
    """The CustomResourceDefinitions of a bundle (KeyError for an unknown bundle)."""
    import copy

    return copy.deepcopy(BUNDLES[bundle])
