"""Services: every rule and validation of the control plane, one module per domain."""

import importlib

MODULES = ("utility", "operations", "clusters")


def load_all() -> None:
    """Import every service module so their operations register in the catalog."""
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
