# Types of `instantstart.kube.k8s`: exactly those of `kubernetes.client`, which that module loads on first use.
from kubernetes.client import *  # noqa: F403
