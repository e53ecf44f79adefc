"""InstantStart: a control plane for Amazon SageMaker HyperPod clusters orchestrated by Amazon EKS."""

__version__ = "0.1.0"
