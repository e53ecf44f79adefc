"""The cluster base: the cluster record, its typed facts, the registry and operation targets."""
