"""The Kubernetes client package (`kubernetes.client`), imported on first use.

`import kubernetes` loads its config, stream, dynamic, watch and informer packages with google-auth, oauthlib,
websocket-client and yaml (~260 modules, ~8 MB resident) that an idle control plane never needs; the first
attribute read here (a call, a model, `ApiException`) imports it, and eks_stage preloads it during an EKS wait.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """`kubernetes.client.<name>`, importing the client on the first read (cached in this module after)."""
    if name.startswith("__"):
        raise AttributeError(name)
    value = getattr(importlib.import_module("kubernetes.client"), name)
    globals()[name] = value
    return value
