"""The twin's AWS side: moto served over HTTP plus extensions for HyperPod, EKS, FSx, quotas and faults."""
