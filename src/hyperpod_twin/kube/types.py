"""Built-in resource types a twin cluster serves, and the objects every new cluster starts with."""

from __future__ import annotations

from hyperpod_twin.kube.store import ObjectStore, ResourceType


def _t(
    group: str,
    version: str,
    kind: str,
    plural: str,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        namespaced=namespaced,
        singular=kind.lower(),
        short_names=short,
        subresources=sub,
        list_kind=kind + "List",
    )


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    # core/v1
    _t("", "v1", "Namespace", "namespaces", False, ("ns",), ("status", "finalize")),
    _t("", "v1", "Node", "nodes", False, ("no",), ("status", "proxy")),
    _t("", "v1", "Pod", "pods", True, ("po",), ("status", "log", "proxy", "eviction", "binding")),
    _t("", "v1", "Service", "services", True, ("svc",), ("status", "proxy")),
    _t("", "v1", "Endpoints", "endpoints", True, ("ep",)),
    _t("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
    _t("", "v1", "Secret", "secrets"),
    _t("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",), ("token",)),
    _t("", "v1", "Event", "events", True, ("ev",)),
    _t("", "v1", "PersistentVolume", "persistentvolumes", False, ("pv",), ("status",)),
    _t("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("pvc",), ("status",)),
    _t("", "v1", "ResourceQuota", "resourcequotas", True, ("quota",), ("status",)),
    _t("", "v1", "LimitRange", "limitranges", True, ("limits",)),
    # apps/v1
    _t("apps", "v1", "Deployment", "deployments", True, ("deploy",), ("status", "scale")),
    _t("apps", "v1", "ReplicaSet", "replicasets", True, ("rs",), ("status", "scale")),
    _t("apps", "v1", "DaemonSet", "daemonsets", True, ("ds",), ("status",)),
    _t("apps", "v1", "StatefulSet", "statefulsets", True, ("sts",), ("status", "scale")),
    _t("apps", "v1", "ControllerRevision", "controllerrevisions"),
    # batch/v1
    _t("batch", "v1", "Job", "jobs", True, (), ("status",)),
    _t("batch", "v1", "CronJob", "cronjobs", True, ("cj",), ("status",)),
    # rbac
    _t("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    _t("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
    _t("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    _t("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    # apiextensions
    _t(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        ("crd", "crds"),
        ("status",),
    ),
    # storage, coordination, scheduling, policy, networking, autoscaling, discovery, admission
    _t("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, ("sc",)),
    _t("storage.k8s.io", "v1", "CSIDriver", "csidrivers", False),
    _t("coordination.k8s.io", "v1", "Lease", "leases"),
    _t("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ("pc",)),
    _t("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",), ("status",)),
    _t("networking.k8s.io", "v1", "Ingress", "ingresses", True, ("ing",), ("status",)),
    _t("networking.k8s.io", "v1", "IngressClass", "ingressclasses", False),
    _t("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, ("netpol",)),
    _t("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, ("hpa",), ("status",)),
    _t("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
    _t("events.k8s.io", "v1", "Event", "events", True, ("ev",)),
    _t("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", False),
    _t(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    _t("apiregistration.k8s.io", "v1", "APIService", "apiservices", False, (), ("status",)),
)

# Create-only review resources answered by the server itself (never stored).
SELF_SUBJECT_REVIEW = _t("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False)
SELF_SUBJECT_ACCESS_REVIEW = _t(
    "authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", False
)
REVIEW_TYPES: tuple[ResourceType, ...] = (SELF_SUBJECT_REVIEW, SELF_SUBJECT_ACCESS_REVIEW)

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

# Verbs discovery lists; review types are create-only.
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def builtin(group: str, plural: str) -> ResourceType:
    """The built-in type of `group` with this plural."""
    for rtype in BUILTIN_TYPES:
        if rtype.group == group and rtype.plural == plural:
            return rtype
    raise KeyError(f"{plural}.{group}")


def core(plural: str) -> ResourceType:
    """The built-in core/v1 type with this plural (for code that needs e.g. pods or namespaces)."""
    return builtin("", plural)


def bootstrap(store: ObjectStore) -> None:
    """Register built-in types and create what a fresh EKS cluster has: namespaces, the kubernetes Service."""
    for rtype in BUILTIN_TYPES:
        store.register(rtype)
    from hyperpod_twin.kube.priority import system_classes

    for priority_class in system_classes():
        store.create(builtin("scheduling.k8s.io", "priorityclasses"), priority_class)
    for ns in INITIAL_NAMESPACES:
        store.create(
            core("namespaces"),
            {
                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            },
        )
    store.create(
        core("services"),
        {
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "10.100.0.1",
                "clusterIPs": ["10.100.0.1"],
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443}],
                "sessionAffinity": "None",
            },
            "status": {"loadBalancer": {}},
        },
    )
    store.create(
        core("endpoints"),
        {
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            # EKS's two control-plane ENIs; nothing behind them answers the proxy (503), as a real
            # API server would not serve its own service proxy either.
            "subsets": [{"addresses": [{"ip": "10.0.0.10"}, {"ip": "10.0.1.10"}],
                         "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}],
        },
    )
    store.create(
        builtin("storage.k8s.io", "storageclasses"),
        {
            "metadata": {"name": "gp2", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "kubernetes.io/aws-ebs",
            "parameters": {"fsType": "ext4", "type": "gp2"},
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
