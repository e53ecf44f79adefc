"""The Kubernetes label keys InstantStart writes or reads in more than one place, and the manager it names."""

from __future__ import annotations

MANAGER = "instantstart"
"""Who manages our objects: the managed-by label's value and the server-side-apply field manager."""

LABEL_MANAGED = "app.kubernetes.io/managed-by"
"""The label key that marks an object as ours (value MANAGER)."""

MANAGED_LABELS = {LABEL_MANAGED: MANAGER}
"""The managed-by label as a labels mapping; copy it (`{**MANAGED_LABELS, ...}`) before adding to it."""

# Well-known keys more than one module reads or writes (one spelling each).
LABEL_APP = "app.kubernetes.io/name"
"""The application name label: a model server's pods and Services, the KubeRay operator's pods."""

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""A node's EC2 instance type (ml.* on HyperPod nodes): node selectors, affinities and node summaries."""

HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
"""The HyperPod health agent's verdict on a node (absent on a node that is not HyperPod's)."""

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label Kubernetes puts on every namespace, its own name: how a selector names one namespace."""
