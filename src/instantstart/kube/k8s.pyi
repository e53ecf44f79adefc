# Types of `instantstart.kube.k8s`: exactly those of `kubernetes.client`, which that module loads on first use.
from types import ModuleType

from kubernetes.client import *  # noqa: F403

def load(module: str) -> ModuleType: ...
