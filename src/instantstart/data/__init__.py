"""Data files of the control plane (instance types, the dependency catalog)."""
