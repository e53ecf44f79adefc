"""Pure builders: Kubernetes objects and AWS request bodies, computed from validated inputs."""
