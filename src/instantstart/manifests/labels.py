"""The label every Kubernetes object InstantStart builds carries, and the manager it names (one definition)."""

from __future__ import annotations

MANAGER = "instantstart"
"""Who manages our objects: the managed-by label's value and the server-side-apply field manager."""

LABEL_MANAGED = "app.kubernetes.io/managed-by"
"""The label key that marks an object as ours (value MANAGER)."""

MANAGED_LABELS = {LABEL_MANAGED: MANAGER}
"""The managed-by label as a labels mapping; copy it (`{**MANAGED_LABELS, ...}`) before adding to it."""
