"""Kubernetes adapter: EKS bearer tokens and API clients built from DescribeCluster."""
