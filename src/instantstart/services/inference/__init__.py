"""Inference: self-managed model servers (Deployments with GPUs) and calling them through the service proxy."""
