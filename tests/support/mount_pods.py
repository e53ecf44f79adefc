"""Pods that write files through an S3 claim on the twin (its write-files annotation), and what they were refused."""

from __future__ import annotations

import json
from typing import Any


def writer_pod(name: str, claim: str, files: dict[str, str]) -> dict[str, Any]:
    """A long-running pod mounting `claim` at /data that writes `files` (twin annotation) once Running."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"twin.instantstart.io/write-files": json.dumps(files)}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"],
                                 "resources": {"requests": {"cpu": "10m"}},
                                 "volumeMounts": [{"name": "d", "mountPath": "/data"}]}],
                 "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}],
                 "tolerations": [{"operator": "Exists"}]},
    }


def write_denials(core: Any, pod: str) -> list[str]:
    """The S3WriteDenied event messages of `pod` (namespace default), sorted."""
    events = core.list_namespaced_event("default").items
    return sorted(e.message for e in events if e.reason == "S3WriteDenied" and e.involved_object.name == pod)
