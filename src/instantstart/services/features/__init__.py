"""HyperPod advanced features: one dependency-aware toggle per managed capability. A workflow beside
services/cluster/ (it drives the dependency reconciler and the Karpenter toggle), so no domain imports it."""
