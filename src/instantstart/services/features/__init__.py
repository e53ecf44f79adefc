"""HyperPod advanced features: one dependency-aware toggle per managed capability."""
