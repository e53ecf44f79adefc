"""The kinds the simulator works on, as the store keys them (group, plural), and its (namespace, name) work keys."""

from __future__ import annotations

from collections.abc import Hashable

# A group/plural pair as the store keys types.
TypeKey = tuple[str, str]

PODS: TypeKey = ("", "pods")
NODES: TypeKey = ("", "nodes")
EVENTS: TypeKey = ("", "events")
SERVICES: TypeKey = ("", "services")
ENDPOINTS: TypeKey = ("", "endpoints")
SECRETS: TypeKey = ("", "secrets")
NAMESPACES: TypeKey = ("", "namespaces")
PVS: TypeKey = ("", "persistentvolumes")
PVCS: TypeKey = ("", "persistentvolumeclaims")
DEPLOYMENTS: TypeKey = ("apps", "deployments")
REPLICASETS: TypeKey = ("apps", "replicasets")
DAEMONSETS: TypeKey = ("apps", "daemonsets")
STATEFULSETS: TypeKey = ("apps", "statefulsets")
JOBS: TypeKey = ("batch", "jobs")
STORAGECLASSES: TypeKey = ("storage.k8s.io", "storageclasses")
ENDPOINTSLICES: TypeKey = ("discovery.k8s.io", "endpointslices")
CRDS: TypeKey = ("apiextensions.k8s.io", "customresourcedefinitions")


def nsname(key: Hashable) -> tuple[str, str]:
    """A (namespace, name) work key."""
    assert isinstance(key, tuple) and len(key) == 2
    return str(key[0]), str(key[1])
