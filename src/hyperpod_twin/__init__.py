"""The digital twin: an offline AWS account with HyperPod-capable EKS clusters, for tests and `serve --twin`."""
