"""Kubernetes side of the twin: one API server per EKS cluster, backed by an in-memory object store."""
