"""The Kubernetes client package (`kubernetes.client`), imported on first use.

`import kubernetes` loads its config, stream, dynamic, watch and informer packages with google-auth, oauthlib,
websocket-client and yaml (~260 modules, ~8 MB resident) that an idle control plane never needs; the first
attribute read here (a call, a model, `ApiException`) imports it, and eks_stage preloads it during an EKS wait.

Every first import of the package goes through `load`, one thread at a time: the package's modules import each
other in a cycle, and two threads importing different ones at once (a resumed operation's concurrent steps
reading `ApiClient` and `kubernetes.dynamic`) make Python break the lock cycle with a half-initialised module
("cannot import name 'ApiClient'" or a _DeadlockError).
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any

_import_lock = threading.Lock()


def load(module: str) -> ModuleType:
    """`kubernetes.<...>` by name, imported under the process-wide lock the first time (a dict read after)."""
    with _import_lock:
        return importlib.import_module(module)


def __getattr__(name: str) -> Any:
    """`kubernetes.client.<name>`, importing the client on the first read (cached in this module after). The
    client's own exports are lazy too (each API class imports its module on first read): under the same lock."""
    if name.startswith("__"):
        raise AttributeError(name)
    with _import_lock:
        value = getattr(importlib.import_module("kubernetes.client"), name)
    globals()[name] = value
    return value
