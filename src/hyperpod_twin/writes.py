"""Counts of mutating calls the twin answered (AWS operations and Kubernetes writes), for no-op checks."""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_counts: Counter[str] = Counter()
_READ_PREFIXES = ("Describe", "List", "Get", "Search", "Lookup", "Head", "Check")


def aws(service: str, operation: str) -> None:
    """Count an AWS call when it can change state (not Describe/List/Get…, not STS)."""
    if service == "sts" or operation.startswith(_READ_PREFIXES):
        return
    with _lock:
        _counts[f"aws:{service}.{operation}"] += 1


def kube(cluster: str, method: str, path: str) -> None:
    """Count a Kubernetes write (anything but GET/HEAD)."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return
    with _lock:
        _counts[f"kube:{cluster}:{method} {path}"] += 1


def snapshot() -> dict[str, int]:
    """Every counter."""
    with _lock:
        return dict(_counts)


def reset() -> None:
    """Zero the counters."""
    with _lock:
        _counts.clear()
