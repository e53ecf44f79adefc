"""Services: every rule and validation of the control plane, one module per domain."""

import importlib

MODULES = (
    "utility",
    "operations",
    "clusters",
    "cluster_eks",
    "hyperpod",
    "preflight",
    "dependencies",
    "cluster_status",
    "storage",
    "deletion",
    "cluster_import",
    "cluster_create",
    "instance_groups",
    "nodes",
    "nodegroups",
    "karpenter",
    "advanced_features",
    "kube_resources",
)


def load_all(plugins: tuple[str, ...] | list[str] = ()) -> None:
    """Import every service module, then each plugin module, so their operations register in the catalog."""
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
    for name in plugins:
        importlib.import_module(name)
