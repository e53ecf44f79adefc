"""The capacity domain: HyperPod instance groups, nodes, EKS node groups and HyperPod-managed Karpenter."""
