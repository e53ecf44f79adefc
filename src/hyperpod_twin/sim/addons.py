"""What an EKS add-on puts into the cluster besides CRDs: its controller Deployments, DaemonSets, CSIDrivers."""

from __future__ import annotations

from dataclasses import dataclass, field

from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import DAEMONSETS, DEPLOYMENTS, TypeKey
from hyperpod_twin.sim.kobj import Obj

CSIDRIVERS: TypeKey = ("storage.k8s.io", "csidrivers")
MANAGED_BY = "eks.amazonaws.com/component"
_TOLERATE_ALL = [{"operator": "Exists"}]


@dataclass(frozen=True)
class AddonWorkloads:
    """The workloads of one add-on (names as the add-on's manifests use them where documented)."""

    namespace: str
    deployments: tuple[tuple[str, int], ...] = ()  # (name, replicas)
    daemonsets: tuple[str, ...] = ()
    csi_drivers: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)


ADDON_WORKLOADS: dict[str, AddonWorkloads] = {
    "coredns": AddonWorkloads("kube-system", deployments=(("coredns", 2),)),
    "kube-proxy": AddonWorkloads("kube-system", daemonsets=("kube-proxy",)),
    "vpc-cni": AddonWorkloads("kube-system", daemonsets=("aws-node",)),
    "eks-pod-identity-agent": AddonWorkloads("kube-system", daemonsets=("eks-pod-identity-agent",)),
    "metrics-server": AddonWorkloads("kube-system", deployments=(("metrics-server", 2),)),
    "aws-ebs-csi-driver": AddonWorkloads(
        "kube-system",
        deployments=(("ebs-csi-controller", 2),),
        daemonsets=("ebs-csi-node",),
        csi_drivers=("ebs.csi.aws.com",),
    ),
    "aws-mountpoint-s3-csi-driver": AddonWorkloads(
        "kube-system",
        deployments=(("s3-csi-controller", 1),),
        daemonsets=("s3-csi-node",),
        csi_drivers=("s3.csi.aws.com",),
    ),
    "aws-fsx-csi-driver": AddonWorkloads(
        "kube-system",
        deployments=(("fsx-csi-controller", 2),),
        daemonsets=("fsx-csi-node",),
        csi_drivers=("fsx.csi.aws.com",),
    ),
    "cert-manager": AddonWorkloads(
        "cert-manager", deployments=(("cert-manager", 1), ("cert-manager-cainjector", 1), ("cert-manager-webhook", 1))
    ),
    "amazon-sagemaker-hyperpod-training-operator": AddonWorkloads(
        "aws-hyperpod", deployments=(("hp-training-operator-controller-manager", 1),)
    ),
    "amazon-sagemaker-hyperpod-inference": AddonWorkloads(
        "hyperpod-inference-system", deployments=(("hyperpod-inference-controller-manager", 1),)
    ),
    "amazon-sagemaker-hyperpod-observability": AddonWorkloads(
        "hyperpod-observability", deployments=(("hyperpod-observability-operator", 1),)
    ),
    "amazon-sagemaker-hyperpod-taskgovernance": AddonWorkloads(
        "kueue-system", deployments=(("kueue-controller-manager", 1),)
    ),
}


def _template(addon: str, name: str, version: str, region: str) -> Obj:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": addon, MANAGED_BY: addon}
    return {
        "metadata": {"labels": labels},
        "spec": {
            "priorityClassName": "system-cluster-critical",
            "tolerations": _TOLERATE_ALL,
            "containers": [
                {
                    "name": name,
                    "image": f"602401143452.dkr.ecr.{region}.amazonaws.com/eks/{name}:{version or 'latest'}",
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                }
            ],
        },
    }


def install(sim: ClusterSim, addon: str, version: str = "", namespace: str | None = None) -> list[str]:
    """Create the add-on's namespace, Deployments, DaemonSets and CSIDrivers; returns what was created."""
    spec = ADDON_WORKLOADS.get(addon)
    if spec is None:
        return []
    ns = namespace or spec.namespace
    region = sim.runtime.arn.split(":")[3] if sim.runtime.arn.count(":") >= 5 else "us-west-2"
    sim.ensure_namespace(ns)
    created: list[str] = []
    if addon == "metrics-server":
        from hyperpod_twin.sim import metrics

        metrics.register_types(sim)
        sim.enqueue(sim.controller(metrics.MetricsServer), metrics.ALL)
        created.append(f"apiservice/{metrics.VERSION}.{metrics.GROUP}")
    meta_labels = {MANAGED_BY: addon, "app.kubernetes.io/managed-by": "EKS"}
    for name, replicas in spec.deployments:
        template = _template(addon, name, version, region)
        body = {
            "metadata": {"name": name, "namespace": ns, "labels": dict(meta_labels)},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                "template": template,
            },
        }
        if sim.create(DEPLOYMENTS, body) is not None:
            created.append(f"deployment/{ns}/{name}")
    for name in spec.daemonsets:
        body = {
            "metadata": {"name": name, "namespace": ns, "labels": dict(meta_labels)},
            "spec": {
                "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                "template": _template(addon, name, version, region),
            },
        }
        if sim.create(DAEMONSETS, body) is not None:
            created.append(f"daemonset/{ns}/{name}")
    for driver in spec.csi_drivers:
        body = {
            "metadata": {"name": driver, "labels": dict(meta_labels)},
            "spec": {"attachRequired": False, "podInfoOnMount": False, "volumeLifecycleModes": ["Persistent"]},
        }
        if sim.create(CSIDRIVERS, body) is not None:
            created.append(f"csidriver/{driver}")
    return created


def uninstall(sim: ClusterSim, addon: str, namespace: str | None = None) -> None:
    """Remove what `install` created (their pods go with them through garbage collection)."""
    spec = ADDON_WORKLOADS.get(addon)
    if spec is None:
        return
    ns = namespace or spec.namespace
    if addon == "metrics-server":
        from hyperpod_twin.sim import metrics

        for plural in ("nodes", "pods"):
            sim.store.unregister(metrics.GROUP, plural)
    for name, _ in spec.deployments:
        sim.delete(DEPLOYMENTS, ns, name)
    for name in spec.daemonsets:
        sim.delete(DAEMONSETS, ns, name)
    for driver in spec.csi_drivers:
        sim.delete(CSIDRIVERS, "", driver)
