"""HyperPod-managed Karpenter: a validated toggle (role, cluster autoscaling, node class + NodePool) and its status.

Importing the package registers its tools and kinds in catalog order: install, uninstall, then status."""

from instantstart.services.capacity.karpenter import status, toggle  # noqa: F401
