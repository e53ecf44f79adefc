"""Cluster dependencies: the catalog (data/dependencies.yaml), EKS add-ons, helm releases, manifests, Pod Identity."""
